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
	"net/http"
	"net/http/httptrace"
	"os"
	"reflect"
	"runtime/debug"
	"sort"
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

// errorCodes reads the S3 error code and the HTTP status a client reports for a failed request:
// each client has its own error types.
type errorCodes func(err error) (code string, status int)

// expect fails unless err is an error with code and status.
func (codes errorCodes) expect(err error, code string, status int, what string) {
	err = rejects(err, what)
	gotCode, gotStatus := codes(err)
	if gotCode != code || gotStatus != status {
		fail("%s: got %s %d (%v), expected %s %d", what, gotCode, gotStatus, err, code, status)
	}
}

// describe names the outcome of a failed request for the messages of a soak: the status and the
// code of an answer (an answer without a body, such as a 304, may have no code), or the error
// itself when no answer came.
func (codes errorCodes) describe(err error) string {
	code, status := codes(err)
	switch {
	case status != 0 && code != "":
		return fmt.Sprintf("%d %s", status, code)
	case status != 0:
		return strconv.Itoa(status)
	default:
		return err.Error()
	}
}

// fails makes a request of a soak step through call, which must fail with code and status.
func (codes errorCodes) fails(call SoakCall, name string, fn func() error, code string, status int) {
	codes.expect(call(name, fn), code, status, "error of "+name)
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

// SoakModel is what the bucket of a soak holds after the steps so far: the data and the ETag
// (as the client gives it) of each key written. The operations check the answers against it.
type SoakModel struct {
	Keys  []string // the twelve keys the steps pick from, as in the JavaScript suites' soaks
	data  map[string][]byte
	etags map[string]string
}

func newSoakModel() *SoakModel {
	m := &SoakModel{Keys: make([]string, 12), data: map[string][]byte{}, etags: map[string]string{}}
	for i := range m.Keys {
		m.Keys[i] = fmt.Sprintf("soak/k%02d", i)
	}
	return m
}

// soakSizes are the sizes of the bodies a soak writes, drawn as the JavaScript suites' soaks draw
// them: an empty body twice as often as each other size.
var soakSizes = []int{0, 0, 1, 100, 4 * KiB, 70 * KiB}

// Body draws a body for a write from rng.
func (m *SoakModel) Body(rng *Rand) []byte {
	n := soakSizes[rng.Intn(len(soakSizes))]
	return randomBytes(n, int64(rng.Intn(1e9)))
}

// Get returns the data of key, and whether the key holds an object.
func (m *SoakModel) Get(key string) ([]byte, bool) {
	data, ok := m.data[key]
	return data, ok
}

// ETag is the ETag of the object of key.
func (m *SoakModel) ETag(key string) string { return m.etags[key] }

// Set records a write of data to key, with the ETag the answer gave.
func (m *SoakModel) Set(key string, data []byte, etag string) {
	m.data[key], m.etags[key] = data, etag
}

// Delete records that key holds nothing.
func (m *SoakModel) Delete(key string) {
	delete(m.data, key)
	delete(m.etags, key)
}

// Stored lists the keys that hold an object, in listing order.
func (m *SoakModel) Stored() []string {
	keys := []string{}
	for k := range m.data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// succeeds makes a request of a soak step through call, which must succeed, and returns its
// answer.
func succeeds[T any](call SoakCall, name string, fn func() (T, error)) T {
	var answer T
	check(call(name, func() (err error) {
		answer, err = fn()
		return err
	}), name)
	return answer
}

// soakGet is the "get" operation of a soak: read(ctx, key) reads a whole object, which must be
// what the model holds, or fail with NoSuchKey where the model holds nothing.
func soakGet(model *SoakModel, codes errorCodes, read func(ctx context.Context, key string) ([]byte, error)) SoakOp {
	return SoakOp{"get", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		data, ok := model.Get(key)
		if !ok {
			codes.fails(call, "GetObject", func() error {
				_, err := read(ctx, key)
				return err
			}, "NoSuchKey", 404)
			return nil
		}
		got := succeeds(call, "GetObject", func() ([]byte, error) { return read(ctx, key) })
		expectSameBytes(got, data, "GET "+key)
		return nil
	}}
}

// soakRanged is the "ranged" operation of a soak: up to 100 bytes at a random offset of an
// object, bytes first to end-1 (end is cut to the object's size), which readRange reads. A key
// the model holds no data under is written with put instead.
func soakRanged(model *SoakModel, put SoakOp,
	readRange func(ctx context.Context, key string, first, end int) ([]byte, error)) SoakOp {
	return SoakOp{"ranged", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		data, _ := model.Get(key)
		if len(data) == 0 {
			return put.Run(ctx, key, rng, call)
		}
		first := rng.Intn(len(data))
		end := first + 100
		if end > len(data) {
			end = len(data)
		}
		got := succeeds(call, "GetObject", func() ([]byte, error) { return readRange(ctx, key, first, end) })
		expectSameBytes(got, data[first:end], "ranged GET")
		return nil
	}}
}

// soakCopy is the "copy" operation of a soak: copyObject(ctx, key, source) copies a random key of
// the model to key and returns the ETag the answer gives. The copy must fail with NoSuchKey where
// the source holds nothing, and with InvalidRequest where it is key itself (a copy onto itself
// that changes nothing). copied(ctx, call, key, data, etag) checks the ETag of a copy that
// succeeded (a copy is a new object in one part: its ETag is the MD5 of its data, as on S3) and
// returns it.
func soakCopy(model *SoakModel, codes errorCodes,
	copyObject func(ctx context.Context, key, source string) (string, error),
	copied func(ctx context.Context, call SoakCall, key string, data []byte, etag string) string) SoakOp {
	return SoakOp{"copy", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		source := model.Keys[rng.Intn(len(model.Keys))]
		var etag string
		run := func() (err error) {
			etag, err = copyObject(ctx, key, source)
			return err
		}
		data, ok := model.Get(source)
		switch {
		case !ok:
			codes.fails(call, "CopyObject", run, "NoSuchKey", 404)
		case source == key:
			codes.fails(call, "CopyObject", run, "InvalidRequest", 400)
		default:
			check(call("CopyObject", run), "CopyObject")
			model.Set(key, data, copied(ctx, call, key, data, etag))
		}
		return nil
	}}
}

// soakListing is the "listing" operation of a soak: list(ctx), the request name, lists the keys
// under soak/, which must be the keys the model holds.
func soakListing(model *SoakModel, name string, list func(ctx context.Context) ([]string, error)) SoakOp {
	return SoakOp{"listing", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		got := succeeds(call, name, func() ([]string, error) { return list(ctx) })
		if got == nil {
			got = []string{}
		}
		expectEqual(got, model.Stored(), "the keys under soak/")
		return nil
	}}
}

// soak is soak() of compat.mjs: settings.SoakOperations steps, each an operation of ops on one
// of model.Keys, picked by a generator seeded with 28 as the JavaScript suites'. No request may
// take longer than settings.SoakBound, and a step that hangs fails after 30 s instead of waiting
// for a client whose timeouts are minutes. codes names the outcome of a failed request for the
// messages.
func soak(ctx context.Context, settings Settings, ops []SoakOp, model *SoakModel, codes errorCodes) error {
	keys := model.Keys
	rng := newRand(28)
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
				status = codes.describe(err)
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

// quoted is an ETag as S3 sends it in a header.
func quoted(etag string) string { return `"` + etag + `"` }

// hideSeek is a reader whose length a client cannot learn: a stream.
type hideSeek struct{ io.Reader }

// What follows are the workloads both Go clients run: the drivers, with the client's requests
// passed in as functions. What a client does differently (which API, its quirks) stays in its
// file.

// SoakCheck registers the connection-reuse soak that run makes with a client of its own.
func (s *Suite) SoakCheck(run func(ctx context.Context, settings Settings) error) {
	s.Check("reuse", fmt.Sprintf("%d random operations, errors included, on a pool of 2 connections: each under %g s",
		s.settings.SoakOperations, s.settings.SoakBound.Seconds()), func(ctx context.Context) error {
		return run(ctx, s.settings)
	})
}

// smallFilesClient is how the small-files workload makes its requests.
type smallFilesClient struct {
	put func(key string, body []byte) error
	// list lists the keys under small/ (after startAfter, unless it is empty).
	list func(startAfter string) []string
	// prefixes lists the common prefixes under small/ with the delimiter "/".
	prefixes func() []string
	// remove deletes keys, as a user empties a prefix: in batches.
	remove func(keys []string)
	// listings runs the client's own listings of all of them (in listing order): pages,
	// ListObjects V1.
	listings func(all []string)
}

// smallFiles writes 3,000 objects of 100 bytes to 14 KiB under five prefixes from 32
// goroutines, lists them (the client's listings, the prefixes, StartAfter near the end) and
// deletes them.
func smallFiles(c smallFilesClient) {
	const count = 3000
	var all []string
	for i := 0; i < count; i++ {
		all = append(all, fmt.Sprintf("small/p%d/obj-%05d.bin", i%5, i))
	}
	check(parallelLimit(count, 32, func(i int) error {
		return c.put(all[i], randomBytes(100+(i%15)*KiB, int64(100+i)))
	}), "PutObject")
	sort.Strings(all)
	c.listings(all)
	expectEqual(c.prefixes(), []string{"small/p0/", "small/p1/", "small/p2/", "small/p3/", "small/p4/"}, "prefixes")
	expectEqual(c.list("small/p4/obj-02989.bin"), []string{"small/p4/obj-02994.bin", "small/p4/obj-02999.bin"},
		"StartAfter")
	c.remove(all)
	expectEqual(len(c.list("")), 0, "objects left after deleting them")
}

// awkwardKeys writes a small body under odd/ for each of awkwardNames with put, hands the keys in
// listing (byte) order to listed for the client's listings, and reads every body back with get.
func awkwardKeys(put func(key string, body []byte), listed func(want []string), get func(key string) []byte) {
	var ks []string
	for i, n := range awkwardNames {
		k := "odd/" + n
		ks = append(ks, k)
		put(k, []byte(fmt.Sprintf("body %d", i)))
	}
	want := append([]string{}, ks...)
	sort.Strings(want) // byte order, as S3 lists
	listed(want)
	for i, k := range ks {
		expectEqual(string(get(k)), fmt.Sprintf("body %d", i), fmt.Sprintf("body of %q", k))
	}
}

// fetch sends a request to a presigned URL with net/http, as a browser or curl would, and
// returns the status, the body and the header of the answer. header holds the headers the URL
// was signed with (Host is the URL's own).
func fetch(ctx context.Context, method, u string, header http.Header, body []byte) (int, string, http.Header) {
	req := must(http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body)))
	for k, v := range header {
		if !strings.EqualFold(k, "Host") {
			req.Header[k] = v
		}
	}
	resp := must(http.DefaultClient.Do(req))
	defer resp.Body.Close()
	return resp.StatusCode, string(must(io.ReadAll(resp.Body))), resp.Header
}

// expectPresignedHead checks the answer to a presigned HEAD of an object holding body.
func expectPresignedHead(status int, header http.Header, body []byte) {
	expectEqual([]interface{}{status, header.Get("Content-Length"), header.Get("ETag")},
		[]interface{}{200, strconv.Itoa(len(body)), quoted(md5hex(body))}, "presigned HEAD")
}

// expectExpired waits until a URL presigned for one second has expired, and expects it refused.
func expectExpired(ctx context.Context, method, u string, header http.Header) {
	time.Sleep(2100 * time.Millisecond)
	status, text, _ := fetch(ctx, method, u, header, nil)
	expectEqual(status, 403, "expired URL")
	expect(strings.Contains(text, "<Code>AccessDenied</Code>") && strings.Contains(strings.ToLower(text), "expired"),
		"expired URL body: %s", text)
}

// concurrentRangedReads is a data loader's access: 64 goroutines read 1 MiB ranges at random
// offsets of a 64 MiB object, which put writes first. readRange reads bytes first to last
// (inclusive).
func concurrentRangedReads(put func(data []byte), readRange func(first, last int) []byte) error {
	data := randomBytes(64*MiB, 600)
	put(data)
	rng := newRand(600)
	const readers, reads = 64, 4
	offsets := make([]int, readers*reads)
	for i := range offsets {
		offsets[i] = rng.Intn(len(data) - 1*MiB)
	}
	return parallel(readers, func(r int) error {
		for i := 0; i < reads; i++ {
			first := offsets[r*reads+i]
			got := readRange(first, first+1*MiB-1)
			expectSameBytes(got, data[first:first+1*MiB], fmt.Sprintf("range at %d", first))
		}
		return nil
	})
}

// readersDuringOverwrites overwrites an object with six versions (of sizeOf(v) bytes), twice
// over, while three goroutines read it whole until the writes end: every read must be one of the
// versions, never a mix, and at least one read must overlap the writes. write(v, body) writes
// version v; newReader gives each reading goroutine a client of its own, as separate processes
// have.
func readersDuringOverwrites(sizeOf func(v int) int, write func(v int, body []byte),
	newReader func() (read func() []byte)) error {
	versions := make([][]byte, 6)
	hashes := map[string]bool{}
	for v := range versions {
		versions[v] = randomBytes(sizeOf(v), int64(700+v))
		hashes[sha256hex(versions[v])] = true
	}
	write(0, versions[0])
	var writing int32 = 1
	var reads int32
	err := parallel(4, func(i int) error {
		if i == 0 {
			defer atomic.StoreInt32(&writing, 0)
			for round := 0; round < 2; round++ {
				for v, body := range versions {
					write(v, body)
				}
			}
			return nil
		}
		read := newReader()
		for atomic.LoadInt32(&writing) == 1 {
			got := read()
			n := atomic.AddInt32(&reads, 1)
			expect(hashes[sha256hex(got)], "a read (%d) of %d bytes matches no written version", n, len(got))
		}
		return nil
	})
	if err != nil {
		return err
	}
	expect(atomic.LoadInt32(&reads) > 0, "no read overlapped the writes")
	return nil
}
