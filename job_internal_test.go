package kyu

import (
	"reflect"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// fillJob maps every field of a stored job that Job has onto it: with
// every field of the record set, no public field of the Job is left zero,
// and each equals the record's field of the same name.
func TestFillJobSetsEveryField(t *testing.T) {
	t.Parallel()
	var rec backend.Job
	rv := reflect.ValueOf(&rec).Elem()
	for i := range rv.NumField() {
		setNonZero(t, rv.Type().Field(i).Name, rv.Field(i))
	}
	var j Job
	fillJob(&j, &rec)
	jv := reflect.ValueOf(j)
	for i := range jv.NumField() {
		f := jv.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if jv.Field(i).IsZero() {
			t.Errorf("Job.%s is left zero", f.Name)
			continue
		}
		if want := rv.FieldByName(f.Name); !want.IsValid() || !reflect.DeepEqual(jv.Field(i).Interface(), want.Interface()) {
			t.Errorf("Job.%s = %v, want the record's %v", f.Name, jv.Field(i), want)
		}
	}
}

// setNonZero gives v, a field of backend.Job, a value that is not zero.
func setNonZero(t *testing.T, name string, v reflect.Value) {
	t.Helper()
	switch v.Interface().(type) {
	case time.Time:
		v.Set(reflect.ValueOf(time.Unix(1700000000, 0)))
		return
	case *backend.Progress:
		v.Set(reflect.ValueOf(&backend.Progress{Percent: 1}))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(name)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(3)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("v"))
		v.Set(m)
	default:
		t.Fatalf("backend.Job.%s: no non-zero value for kind %s", name, v.Kind())
	}
}
