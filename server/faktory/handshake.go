package faktory

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Iterations of the password hash a client computes: a random count in
// [minIterations, minIterations+iterationSpread), as Faktory's clients
// expect a few thousand.
const (
	minIterations   = 4000
	iterationSpread = 4096
)

// hi is the server's greeting: the protocol version and, when a
// password is required, the salt and iteration count of its hash.
type hi struct {
	V int    `json:"v"`
	I int    `json:"i,omitempty"`
	S string `json:"s,omitempty"`
}

// newHI builds a greeting; with a password it draws a fresh salt and
// iteration count.
func newHI(password string) (hi, error) {
	h := hi{V: 2}
	if password == "" {
		return h, nil
	}
	salt := make([]byte, 8)
	if _, err := rand.Read(salt); err != nil {
		return h, fmt.Errorf("faktory: salt: %w", err)
	}
	n, err := rand.Int(rand.Reader, big.NewInt(iterationSpread))
	if err != nil {
		return h, fmt.Errorf("faktory: iterations: %w", err)
	}
	h.S = hex.EncodeToString(salt)
	h.I = minIterations + int(n.Int64())
	return h, nil
}

// PasswordHash is the pwdhash a client sends for password under a
// greeting's salt and iteration count: SHA-256 of password+salt, hashed
// again until iterations hashes in all, in lower-case hex.
func PasswordHash(password, salt string, iterations int) string {
	sum := sha256.Sum256([]byte(password + salt))
	for i := 1; i < iterations; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return hex.EncodeToString(sum[:])
}

// badPassword is the answer to a HELLO whose pwdhash does not match,
// worded as Faktory's clients know it.
const badPassword = "Invalid password"

// errBadPassword refuses a HELLO whose pwdhash does not match.
var errBadPassword = errors.New("invalid password")

// handshake greets the client and reads its HELLO; it returns what HELLO
// said, or an error after which the connection closes.
func (c *conn) handshake() (helloArgs, error) {
	greeting, err := newHI(c.l.cfg.Password)
	if err != nil {
		return helloArgs{}, err
	}
	c.nc.SetDeadline(c.l.cfg.Now().Add(c.l.cfg.HandshakeTimeout))
	b, _ := json.Marshal(greeting)
	if err := c.out.simple("HI " + string(b)); err != nil {
		return helloArgs{}, err
	}
	line, err := readLine(c.in, c.l.cfg.MaxLine)
	if err != nil {
		return helloArgs{}, err
	}
	if !strings.HasPrefix(line, verbHello+" ") {
		c.out.err("ERR", "the first command must be HELLO")
		return helloArgs{}, errors.New("no HELLO")
	}
	cmd, err := parseCommand(line)
	if err != nil {
		c.out.err("ERR", err.Error())
		return helloArgs{}, err
	}
	h := cmd.hello
	if c.l.cfg.Password != "" {
		iter := greeting.I
		if h.Version < 2 {
			iter = 1 // protocol 1 hashed once
		}
		want := PasswordHash(c.l.cfg.Password, greeting.S, iter)
		if subtle.ConstantTimeCompare([]byte(h.PwdHash), []byte(want)) != 1 {
			c.out.err("ERR", badPassword)
			return h, errBadPassword
		}
	}
	if h.WID != "" && len(h.WID) > 256 {
		c.out.err("ERR", "wid longer than 256 bytes")
		return h, errors.New("wid too long")
	}
	c.nc.SetDeadline(time.Time{})
	return h, nil
}
