// What the Go clients' checks share, as lib/compat.mjs does for the JavaScript suites: the
// settings the runner hands over (S3COMPAT_*), the results protocol (JSON lines appended to
// S3COMPAT_RESULTS: one "client" record, then one "check" record per check), deterministic test
// data identical to compat.mjs's, a seeded generator and the connection-reuse soak.
//
// A check is a func(ctx) error. It fails when it returns an error or panics: the expect*
// helpers and must panic with a failure, which the suite recovers and reports like an error.

package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http/httptrace"
	"os"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The columns of the README table, in order. A check belongs to exactly one.
var areas = []string{"basic", "multipart", "dataset", "small-files", "checkpoint", "errors",
	"concurrency", "presign", "reuse"}

const (
	KiB = 1024
	MiB = 1024 * KiB
)

// Same keys as AWKWARD_NAMES of lib/compat.py and lib/compat.mjs.
var awkwardNames = []string{
	"space name.txt",
	"plus+sign.txt",
	"percent%41%2F.txt",
	"double//slash.txt",
	"unicodé/ファイル.txt",
	"xml<&>'\".txt",
	"tab\tkey.txt",
	"question?hash#.txt",
	"tilde~equals=.txt",
	"emoji-\U0001F600.txt",
}

// Settings are what the runner hands over in S3COMPAT_*.
type Settings struct {
	Endpoint        string
	AccessKey       string
	SecretKey       string
	ReaderAccessKey string
	ReaderSecretKey string
	Region          string
	Client          string
	Results         string
	Tmp             string
	Only            string
	// The connection-reuse soak ("reuse"): one client with a small connection pool runs a long
	// random mix of operations, successes and errors alike, and none may take longer than
	// SoakBound. A request that leaves a pooled connection in a state the client misreads shows
	// up as one operation waiting for the client's read timeout.
	SoakOperations int
	SoakBound      time.Duration
}

func loadSettings() (Settings, error) {
	env := func(name, fallback string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return fallback
	}
	s := Settings{
		Endpoint:        env("S3COMPAT_ENDPOINT", ""),
		AccessKey:       env("S3COMPAT_ACCESS_KEY", ""),
		SecretKey:       env("S3COMPAT_SECRET_KEY", ""),
		ReaderAccessKey: env("S3COMPAT_READER_ACCESS_KEY", ""),
		ReaderSecretKey: env("S3COMPAT_READER_SECRET_KEY", ""),
		Region:          env("S3COMPAT_REGION", "us-east-1"),
		Client:          env("S3COMPAT_CLIENT", "unnamed"),
		Results:         env("S3COMPAT_RESULTS", ""),
		Tmp:             env("S3COMPAT_TMP", os.TempDir()),
		Only:            env("S3COMPAT_ONLY", ""),
	}
	n, err := strconv.Atoi(env("S3COMPAT_SOAK_OPERATIONS", "600"))
	if err != nil {
		return s, fmt.Errorf("S3COMPAT_SOAK_OPERATIONS: %w", err)
	}
	s.SoakOperations = n
	bound, err := strconv.ParseFloat(env("S3COMPAT_SOAK_BOUND_SECONDS", "2"), 64)
	if err != nil {
		return s, fmt.Errorf("S3COMPAT_SOAK_BOUND_SECONDS: %w", err)
	}
	s.SoakBound = time.Duration(bound * float64(time.Second))
	return s, nil
}

// failure is what the expect* helpers and must panic with: a check that fails, as opposed to a
// bug of the suite, whose panic is reported with its stack.
type failure struct{ err error }

func (f failure) Error() string { return f.err.Error() }
func (f failure) Unwrap() error { return f.err }

func fail(format string, args ...interface{}) {
	panic(failure{fmt.Errorf(format, args...)})
}

func expect(cond bool, format string, args ...interface{}) {
	if !cond {
		fail(format, args...)
	}
}

// shorten keeps error messages readable when they show large values.
func shorten(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func expectEqual(actual, expected interface{}, what string) {
	if !reflect.DeepEqual(actual, expected) {
		fail("%s: got %s, expected %s", what, shorten(fmt.Sprintf("%#v", actual)),
			shorten(fmt.Sprintf("%#v", expected)))
	}
}

// expectSameBytes compares by hash, so that a mismatch of megabytes stays one line.
func expectSameBytes(actual, expected []byte, what string) {
	if !bytes.Equal(actual, expected) {
		fail("%s: got %d bytes (sha256 %s), expected %d bytes (sha256 %s)", what, len(actual),
			sha256hex(actual), len(expected), sha256hex(expected))
	}
}

// must returns v, or fails the check with err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(failure{err})
	}
	return v
}

// check fails the check with err, saying what failed.
func check(err error, what string) {
	if err != nil {
		panic(failure{fmt.Errorf("%s: %w", what, err)})
	}
}

// rejects returns the error of fn, and fails when fn succeeds.
func rejects(err error, what string) error {
	if err == nil {
		fail("%s: succeeded, expected an error", what)
	}
	return err
}

// protect runs fn and turns its panic, if any, into an error: goroutines of a check must not
// take the whole suite down.
func protect(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	return fn()
}

func panicError(r interface{}) error {
	if f, ok := r.(failure); ok {
		return f
	}
	if e, ok := r.(error); ok {
		return fmt.Errorf("panic: %w\n%s", e, debug.Stack())
	}
	return fmt.Errorf("panic: %v\n%s", r, debug.Stack())
}

// parallel runs fn(0) ... fn(n-1) in n goroutines and returns the first error.
func parallel(n int, fn func(i int) error) error {
	return parallelLimit(n, n, fn)
}

// parallelLimit runs fn(0) ... fn(n-1) with at most limit in flight and returns the first error.
func parallelLimit(n, limit int, fn func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := 0
	if limit > n {
		limit = n
	}
	for w := 0; w < limit; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := protect(func() error { return fn(i) }); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func sha256hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func md5hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// randomBytes makes the same deterministic bytes as randomBytes of compat.mjs (xorshift), so
// that a failure can be reproduced and the Go and JavaScript suites agree. The seed goes through
// a float64 multiplication, as JavaScript numbers do: for seeds above 2^21 the product is
// rounded before it is cut to 32 bits.
func randomBytes(n int, seed int64) []byte {
	f := math.Mod(math.Trunc(float64(seed)*2654435761+0x9e3779b9), 4294967296)
	if f < 0 {
		f += 4294967296
	}
	x := uint32(f)
	if x == 0 {
		x = 1
	}
	out := make([]byte, n)
	i := 0
	for ; i+4 <= n; i += 4 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		out[i] = byte(x)
		out[i+1] = byte(x >> 8)
		out[i+2] = byte(x >> 16)
		out[i+3] = byte(x >> 24)
	}
	for ; i < n; i++ {
		out[i] = byte(x >> (8 * (i % 4)))
	}
	return out
}

// Rand is the seeded generator of compat.mjs (mulberry32): floats in [0, 1), so that a soak can
// be replayed, and the same sequence as the JavaScript suites' for the same seed.
type Rand struct{ a uint32 }

func newRand(seed uint32) *Rand { return &Rand{a: seed} }

func (r *Rand) Float() float64 {
	r.a += 0x6d2b79f5
	t := r.a
	t = (t ^ (t >> 15)) * (t | 1)
	t ^= t + (t^(t>>7))*(t|61)
	return float64(t^(t>>14)) / 4294967296
}

// Intn is floor(Float() * n), as the JavaScript suites pick.
func (r *Rand) Intn(n int) int { return int(r.Float() * float64(n)) }

// Suite collects the checks of one client and reports them.
type Suite struct {
	settings Settings
	checks   []registered
	failed   int
}

type registered struct {
	area, name string
	fn         func(ctx context.Context) error
}

type record struct {
	Type    string   `json:"type"`
	Client  string   `json:"client"`
	Version string   `json:"version,omitempty"`
	Area    string   `json:"area,omitempty"`
	Name    string   `json:"name,omitempty"`
	OK      *bool    `json:"ok,omitempty"`
	Seconds *float64 `json:"seconds,omitempty"`
	Detail  *string  `json:"detail,omitempty"`
}

func newSuite(s Settings) *Suite { return &Suite{settings: s} }

func (s *Suite) record(r record) {
	r.Client = s.settings.Client
	line, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	if s.settings.Results == "" {
		fmt.Println(string(line))
		return
	}
	// One write per line with O_APPEND: the records of the runner's suites share the file.
	f, err := os.OpenFile(s.settings.Results, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.Write(append(line, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot write %s: %v\n", s.settings.Results, err)
		os.Exit(2)
	}
}

// Version records what the client is ("client" record).
func (s *Suite) Version(text string) {
	s.record(record{Type: "client", Version: strings.TrimSpace(text)})
}

// Check registers a check; Run runs them in the order registered.
func (s *Suite) Check(area, name string, fn func(ctx context.Context) error) {
	known := false
	for _, a := range areas {
		known = known || a == area
	}
	if !known {
		panic("unknown area " + area)
	}
	s.checks = append(s.checks, registered{area, name, fn})
}

// selected says whether S3COMPAT_ONLY lets a check run: its name contains the text, or one of
// the texts separated by "|" as lib/compat.py reads it.
func (s *Suite) selected(name string) bool {
	if s.settings.Only == "" {
		return true
	}
	for _, part := range strings.Split(s.settings.Only, "|") {
		if part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}

// Run runs the checks and returns the exit status: 1 when one failed.
func (s *Suite) Run(ctx context.Context) int {
	for _, c := range s.checks {
		if !s.selected(c.name) {
			continue
		}
		start := time.Now()
		err := protect(func() error { return c.fn(ctx) })
		seconds := time.Since(start).Seconds()
		ok := err == nil
		detail := ""
		status := "ok  "
		if !ok {
			s.failed++
			status = "FAIL"
			detail = err.Error()
			fmt.Println(detail)
		}
		if len(detail) > 2000 {
			detail = detail[:2000]
		}
		fmt.Printf("%s %-12s %-50s %6.1fs %s\n", status, c.area, c.name, seconds, oneLine(detail))
		rounded := math.Round(seconds*100) / 100
		s.record(record{Type: "check", Area: c.area, Name: c.name, OK: &ok, Seconds: &rounded,
			Detail: &detail})
	}
	if s.failed > 0 {
		return 1
	}
	return 0
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// SoakCall times one request of a soak step: fn makes the request (and reads its answer) and
// returns its error. The name and the status (from statusOf of the soak) go into the message
// of a request that takes longer than the bound, which fails the step.
type SoakCall func(name string, fn func() error) error

// SoakOp is one kind of step of a soak: an operation on key, drawing what it needs from rng and
// making every request through call.
type SoakOp struct {
	Name string
	Run  func(ctx context.Context, key string, rng *Rand, call SoakCall) error
}

// soak is soak() of compat.mjs: settings.SoakOperations steps, each an operation of ops on one
// of keys, picked by a generator seeded with seed. No request may take longer than
// settings.SoakBound, and a step that hangs fails after 30 s instead of waiting for a client
// whose timeouts are minutes. statusOf names the outcome of a failed request (an HTTP status or
// an error code) for the messages.
func soak(ctx context.Context, settings Settings, ops []SoakOp, keys []string, seed uint32,
	statusOf func(error) string) error {
	rng := newRand(seed)
	// Which requests went out on a connection of the pool: a soak whose connections are never
	// reused proves nothing about reuse.
	var taken, reused int64
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		atomic.AddInt64(&taken, 1)
		if info.Reused {
			atomic.AddInt64(&reused, 1)
		}
	}})
	var mu sync.Mutex // the step's goroutine and a step given up on share longest
	longest := struct {
		seconds      float64
		name, status string
	}{}
	steps := 0                 // the steps that ended well
	counts := map[string]int{} // steps per operation, for the log
	var names []string
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		what := fmt.Sprintf("%d steps", steps)
		if steps < settings.SoakOperations {
			what = fmt.Sprintf("failed at step %d of %d", steps, settings.SoakOperations)
		}
		fmt.Printf("soak: %s, the longest request %.3f s (%s, %s)\n", what, longest.seconds,
			longest.name, longest.status)
		var mix []string
		for _, name := range names {
			mix = append(mix, fmt.Sprintf("%s %d", name, counts[name]))
		}
		fmt.Printf("soak: steps per operation: %s\n", strings.Join(mix, ", "))
		fmt.Printf("soak: %d requests sent, %d of them on a reused connection\n",
			atomic.LoadInt64(&taken), atomic.LoadInt64(&reused))
	}()
	for n := 0; n < settings.SoakOperations; n++ {
		op := ops[rng.Intn(len(ops))]
		key := keys[rng.Intn(len(keys))]
		if counts[op.Name] == 0 {
			names = append(names, op.Name)
		}
		counts[op.Name]++
		step := fmt.Sprintf("step %d (%s of %s)", n, op.Name, key)
		call := func(name string, fn func() error) error {
			started := time.Now()
			err := fn()
			elapsed := time.Since(started)
			status := "ok"
			if err != nil {
				status = statusOf(err)
			}
			mu.Lock()
			if elapsed.Seconds() > longest.seconds {
				longest.seconds, longest.name, longest.status = elapsed.Seconds(), name, status
			}
			mu.Unlock()
			if elapsed > settings.SoakBound {
				fail("%s: %s answered %s after %.3f s (bound %g s)", step, name, status,
					elapsed.Seconds(), settings.SoakBound.Seconds())
			}
			return err
		}
		stepCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- protect(func() error { return op.Run(stepCtx, key, rng, call) }) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			err = failure{fmt.Errorf("%s did not end in 30 s", step)}
			cancel()
			// The cancelled request ends soon; wait for it so that the step does not race with
			// the clean-up of the check.
			select {
			case <-done:
			case <-time.After(10 * time.Second):
			}
		}
		cancel()
		if err != nil {
			var f failure
			if errors.As(err, &f) && strings.HasPrefix(f.Error(), "step ") {
				return err
			}
			return fmt.Errorf("%s: %w", step, err)
		}
		steps = n + 1
	}
	expect(atomic.LoadInt64(&reused) > 0, "no request of the soak went out on a reused connection")
	return nil
}

// readAllSized is io.ReadAll for a body whose size is known, without growing the buffer.
func readAllSized(r io.Reader, size int64) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}
