package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/server"
)

// manualClock is a test clock moved by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestKyuNowOnlyUnderATestClock: a production server (no Clock) ignores
// the Kyu-Now header; a server with a test clock honours it.
func TestKyuNowOnlyUnderATestClock(t *testing.T) {
	t.Parallel()
	far := "2040-06-01T00:00:00Z"
	created := func(e *env) time.Time {
		id := e.enqueue(map[string]any{"type": "t"})
		var j struct {
			CreatedAt time.Time `json:"created_at"`
		}
		e.req("GET", "/api/v1/jobs/"+id, nil).decode(t, &j)
		return j.CreatedAt
	}
	prod := newEnv(t, nil)
	before := time.Now()
	id := prod.req("POST", "/api/v1/jobs", `{"type":"t"}`, "Kyu-Now", far)
	var en struct{ ID string }
	id.decode(t, &en)
	var j struct {
		CreatedAt time.Time `json:"created_at"`
	}
	prod.req("GET", "/api/v1/jobs/"+en.ID, nil).decode(t, &j)
	if j.CreatedAt.Before(before.Add(-time.Minute)) || j.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("production server took the caller's Kyu-Now: created %s", j.CreatedAt)
	}

	clock := &manualClock{now: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)}
	test := newEnv(t, func(c *server.Config) { c.Clock = clock; c.MaintenanceInterval = -1 })
	if got := created(test); !got.Equal(clock.Now()) {
		t.Fatalf("test-clock server without the header: created %s; want its clock %s", got, clock.Now())
	}
	r := test.req("POST", "/api/v1/jobs", `{"type":"t"}`, "Kyu-Now", far)
	r.decode(t, &en)
	test.req("GET", "/api/v1/jobs/"+en.ID, nil).decode(t, &j)
	if j.CreatedAt.Format(time.RFC3339) != far {
		t.Fatalf("test-clock server with Kyu-Now %s: created %s", far, j.CreatedAt)
	}
	if r := test.req("POST", "/api/v1/jobs", `{"type":"t"}`, "Kyu-Now", "yesterday"); r.status != 400 {
		t.Fatalf("malformed Kyu-Now: %d; want 400", r.status)
	}
}

// TestIdempotencyBounds: answers expire after the TTL and the oldest go
// first beyond the bound; then a retry enqueues again.
func TestIdempotencyBounds(t *testing.T) {
	t.Parallel()
	clock := &manualClock{now: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newEnv(t, func(c *server.Config) {
		c.Clock = clock
		c.MaintenanceInterval = -1
		c.IdempotencyTTL = time.Minute
		c.IdempotencyEntries = 2
	})
	send := func(key string) string {
		r := e.req("POST", "/api/v1/jobs", `{"type":"t"}`, "Idempotency-Key", key)
		var out struct{ ID string }
		r.decode(t, &out)
		return out.ID
	}
	a := send("a")
	if send("a") != a {
		t.Fatal("a retry within the TTL enqueued again")
	}
	send("b")
	send("c") // a is the oldest of three: forgotten
	if send("a") == a {
		t.Fatal("key a still remembered beyond the bound of 2 answers")
	}
	c := send("c")
	clock.advance(time.Minute)
	if send("c") == c {
		t.Fatal("key c still remembered after its TTL")
	}
}

// TestTLS serves HTTPS with a certificate and key from files.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	srv, err := server.New(server.Config{Backend: openStore(t), Addr: "127.0.0.1:0", TLSCertFile: certFile, TLSKeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(t.Context()) })
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + srv.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("GET /healthz over TLS: %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	if _, err := server.New(server.Config{Backend: openStore(t), TLSCertFile: certFile}); err == nil {
		t.Fatal("a certificate without a key was accepted")
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kyu test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
