package cli

import (
	"reflect"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
)

// TestJobRecordCopiesEveryField: jobRecord maps a kyu.Job back onto
// backend.Job field by field, the inverse of the root package's own
// mapping; a field added to both types and not to jobRecord would vanish
// from `kyu jobs get -o json`. Every exported field of kyu.Job is set to a
// value other than its zero, and the field of the same name in the record
// must hold it.
func TestJobRecordCopiesEveryField(t *testing.T) {
	var j kyu.Job
	v := reflect.ValueOf(&j).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() {
			setNonZero(t, f.Name, v.Field(i))
		}
	}
	rec := reflect.ValueOf(jobRecord(&j)).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		got := rec.FieldByName(f.Name)
		if !got.IsValid() {
			continue // a field of kyu.Job alone
		}
		if !reflect.DeepEqual(got.Interface(), v.Field(i).Interface()) {
			t.Errorf("jobRecord does not copy %s", f.Name)
		}
	}
}

// setNonZero sets v to a value that is not its type's zero.
func setNonZero(t *testing.T, name string, v reflect.Value) {
	t.Helper()
	if v.Type() == reflect.TypeOf(time.Time{}) {
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem())
		v.Set(m)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	default:
		t.Fatalf("field %s: no non-zero value for kind %s", name, v.Kind())
	}
}
