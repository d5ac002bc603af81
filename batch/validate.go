package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"

	"github.com/tidwall/gjson"
)

// maxErrors is how many line errors a failed batch lists.
const maxErrors = 100

// validation is the outcome of checking an input file.
type validation struct {
	errors []ErrorEntry
	total  int
	parts  []partState
	model  string   // the one model every line names, or ""
	models []string // the models the batch may use; empty: any
}

func (v *validation) fail(line int, param, code, msg string) {
	if len(v.errors) == maxErrors {
		return
	}
	e := ErrorEntry{Code: code, Message: msg}
	if line > 0 {
		e.Line = &line
	}
	if param != "" {
		e.Param = &param
	}
	v.errors = append(v.errors, e)
}

// validate reads rec's input file line by line, checks every line, and
// while all are good writes them into work parts: the lines a provider's
// own batch API takes (native(provider) is not nil, and it encodes the
// line) into native parts, one per provider and model, each as large as
// the provider takes, written in chunks; the others into parts of at most
// set.PartLines requests, run in the gateway. It returns the line errors
// when there are any; the parts written are then deleted again. The file
// is streamed: memory holds one line, the open parts' unwritten chunks
// (bounded), and the custom_ids seen.
func (s *Store) validate(ctx context.Context, rec *batchRecord, ex Executor, set Settings, native func(string) NativeAPI) (*validation, error) {
	v := &validation{models: rec.Models}
	_, rc, err := s.OpenFile(ctx, rec.Owner, rec.InputFileID)
	if errors.Is(err, ErrNotFound) {
		v.fail(0, "input_file_id", "file_not_found", fmt.Sprintf("the input file %s no longer exists", rec.InputFileID))
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }() // read only

	dir := s.batchDir(rec.Owner, rec.ID)
	pw := &partWriter{s: s, ctx: ctx, dir: dir, v: v, set: set, groups: make(map[string]*nativeGroup)}
	var (
		br     = bufio.NewReaderSize(rc, 64<<10)
		seen   = make(map[string]struct{})
		lineNo int
		models = make(map[string]struct{}, 1)
	)
	for {
		line, tooLong, err := readLine(br, set.MaxLineBytes)
		if errors.Is(err, io.EOF) && line == nil {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading the input file: %w", err)
		}
		lineNo++
		if tooLong {
			v.fail(lineNo, "", "line_too_long", fmt.Sprintf("line %d is longer than %d bytes", lineNo, set.MaxLineBytes))
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue // blank lines, such as a final newline's, hold no request
		}
		if v.total == set.MaxRequests {
			v.fail(lineNo, "", "too_many_requests",
				fmt.Sprintf("the input file holds more than %d requests, the most a batch may hold", set.MaxRequests))
			break
		}
		v.total++
		route, ok := v.checkLine(lineNo, line, rec.Endpoint, seen, ex)
		if !ok || len(v.errors) > 0 {
			continue // nothing runs: stop writing parts, keep collecting errors
		}
		models[route.Model] = struct{}{}
		if err := pw.add(line, rec.Endpoint, route, native); err != nil {
			return nil, err
		}
	}
	if v.total == 0 && len(v.errors) == 0 {
		v.fail(0, "input_file_id", "empty_file", "the input file holds no requests")
	}
	if len(v.errors) > 0 {
		_ = s.files.Delete(ctx, path.Join(dir, "input"))
		return v, nil
	}
	if err := pw.finish(rec.ID); err != nil {
		return nil, err
	}
	if len(models) == 1 {
		for m := range models {
			v.model = m
		}
	}
	return v, nil
}

// partWriter writes the validated lines of a batch into its parts.
type partWriter struct {
	s   *Store
	ctx context.Context
	dir string
	v   *validation
	set Settings

	gateway      []byte // the open gateway part's lines
	gatewayLines int

	groups   map[string]*nativeGroup // open native parts, by provider and model
	native   []*nativeGroup          // every native part, in order
	buffered int                     // bytes of the native parts' unwritten chunks
}

// nativeGroup is a native part being written: its lines go to one
// provider batch.
type nativeGroup struct {
	part  int // its index in the parts
	lim   NativeLimits
	n     int   // lines
	bytes int64 // the size of their records
	buf   []byte
}

// add puts a checked line into its part.
func (pw *partWriter) add(line []byte, endpoint string, route Route, native func(string) NativeAPI) error {
	g, size, err := pw.nativeGroup(line, endpoint, route, native)
	if err != nil {
		return err
	}
	if g != nil {
		return pw.addNative(g, line, size)
	}
	pw.gateway = append(pw.gateway, line...)
	pw.gateway = append(pw.gateway, '\n')
	pw.gatewayLines++
	if pw.gatewayLines == pw.set.PartLines || len(pw.gateway) >= ChunkSize {
		return pw.flushGateway()
	}
	return nil
}

// nativeGroup returns the native part line goes to, and the size of its
// record, or nil when it runs in the gateway: its provider has no batch
// API for the endpoint here, or cannot encode it.
func (pw *partWriter) nativeGroup(line []byte, endpoint string, route Route, native func(string) NativeAPI) (*nativeGroup, int64, error) {
	if native == nil || route.Upstream == "" {
		return nil, 0, nil
	}
	api := native(route.Provider)
	if api == nil {
		return nil, 0, nil
	}
	lim := api.Limits(endpoint)
	if lim.MaxRequests <= 0 {
		return nil, 0, nil
	}
	key := route.Provider + "\x00" + route.Upstream
	g := pw.groups[key]
	body := gjson.GetBytes(line, "body")
	n := 0
	if g != nil {
		n = g.n
	}
	record, err := api.Encode(endpoint, strconv.Itoa(n), []byte(body.Raw), route.Upstream)
	if err != nil {
		return nil, 0, nil //nolint:nilerr // the provider cannot encode the line: the gateway runs it
	}
	size := int64(len(record) + 1)
	if lim.MaxBytes > 0 && size > lim.MaxBytes {
		return nil, 0, nil
	}
	if g != nil && (g.n == lim.MaxRequests || lim.MaxBytes > 0 && g.bytes+size > lim.MaxBytes) {
		// Full: it is closed, and the line opens the next.
		delete(pw.groups, key)
		if err := pw.flushNative(g); err != nil {
			return nil, 0, err
		}
		g = nil
	}
	if g == nil {
		g = &nativeGroup{part: len(pw.v.parts), lim: lim}
		pw.v.parts = append(pw.v.parts, partState{Provider: route.Provider, Model: route.Upstream,
			Native: &nativeState{}})
		pw.groups[key] = g
		pw.native = append(pw.native, g)
	}
	return g, size, nil
}

// addNative appends line to g, writing chunks as they fill, and keeps the
// unwritten chunks of all native parts within two ChunkSizes.
func (pw *partWriter) addNative(g *nativeGroup, line []byte, size int64) error {
	g.buf = append(g.buf, line...)
	g.buf = append(g.buf, '\n')
	g.n++
	g.bytes += size
	pw.buffered += len(line) + 1
	if len(g.buf) >= ChunkSize {
		return pw.flushNative(g)
	}
	if pw.buffered > 2*ChunkSize {
		largest := g
		for _, o := range pw.groups {
			if len(o.buf) > len(largest.buf) {
				largest = o
			}
		}
		return pw.flushNative(largest)
	}
	return nil
}

// flushNative writes g's unwritten lines as its next chunk.
func (pw *partWriter) flushNative(g *nativeGroup) error {
	if len(g.buf) == 0 {
		return nil
	}
	p := &pw.v.parts[g.part]
	err := pw.s.files.Store(pw.ctx, inputChunkKey(pw.dir, g.part, p.Chunks), g.buf)
	p.Chunks++
	pw.buffered -= len(g.buf)
	g.buf = g.buf[:0]
	return err
}

// flushGateway writes the open gateway part.
func (pw *partWriter) flushGateway() error {
	if pw.gatewayLines == 0 {
		return nil
	}
	n := len(pw.v.parts)
	pw.v.parts = append(pw.v.parts, partState{N: pw.gatewayLines})
	err := pw.s.files.Store(pw.ctx, inputKey(pw.dir, n), pw.gateway)
	pw.gateway, pw.gatewayLines = pw.gateway[:0], 0
	return err
}

// finish writes what is still open, turns native parts smaller than
// their provider takes into gateway parts, and numbers the requests:
// part by part, in the parts' order.
func (pw *partWriter) finish(batchID string) error {
	if err := pw.flushGateway(); err != nil {
		return err
	}
	for _, g := range pw.native {
		if err := pw.flushNative(g); err != nil {
			return err
		}
		p := &pw.v.parts[g.part]
		p.N = g.n
		if g.n < g.lim.MinRequests {
			p.Native, p.Provider, p.Model = nil, "", ""
			continue
		}
		p.Native.Marker = nativeMarker(batchID, g.part)
	}
	start := 0
	for i := range pw.v.parts {
		pw.v.parts[i].Start = start
		start += pw.v.parts[i].N
	}
	return nil
}

// checkLine checks one request line.
func (v *validation) checkLine(lineNo int, line []byte, endpoint string, seen map[string]struct{}, ex Executor) (Route, bool) {
	// encoding/json's validator is iterative and refuses absurd nesting,
	// so a hostile line cannot exhaust the stack; gjson reads it after.
	if !json.Valid(line) || line[0] != '{' {
		v.fail(lineNo, "", "invalid_json", fmt.Sprintf("line %d is not a JSON object", lineNo))
		return Route{}, false
	}
	fields := gjson.GetManyBytes(line, "custom_id", "method", "url", "body")
	id, method, url, body := fields[0], fields[1], fields[2], fields[3]
	switch {
	case id.Type != gjson.String || id.Str == "":
		v.fail(lineNo, "custom_id", "invalid_custom_id", fmt.Sprintf("line %d: custom_id must be a non-empty string", lineNo))
		return Route{}, false
	case method.Type != gjson.String || method.Str != "POST":
		v.fail(lineNo, "method", "invalid_method", fmt.Sprintf("line %d: method must be POST", lineNo))
		return Route{}, false
	case url.Type != gjson.String || url.Str != endpoint:
		v.fail(lineNo, "url", "invalid_url", fmt.Sprintf("line %d: url must be the batch's endpoint, %s", lineNo, endpoint))
		return Route{}, false
	case !body.IsObject():
		v.fail(lineNo, "body", "invalid_body", fmt.Sprintf("line %d: body must be a JSON object", lineNo))
		return Route{}, false
	}
	if _, dup := seen[id.Str]; dup {
		v.fail(lineNo, "custom_id", "duplicate_custom_id", fmt.Sprintf("line %d: custom_id %q is used by an earlier line", lineNo, id.Str))
		return Route{}, false
	}
	seen[id.Str] = struct{}{}
	if gjson.Get(body.Raw, "stream").Bool() {
		v.fail(lineNo, "body.stream", "invalid_body", fmt.Sprintf("line %d: batch requests cannot stream", lineNo))
		return Route{}, false
	}
	route, err := ex.Check(endpoint, []byte(body.Raw), v.models)
	if err != nil {
		v.fail(lineNo, "body", "invalid_request", fmt.Sprintf("line %d: %v", lineNo, err))
		return Route{}, false
	}
	return route, true
}

// readLine returns the next line without its newline. A line longer than
// max is consumed and reported as tooLong, with no bytes.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		n := len(frag)
		if err == nil {
			n-- // the newline is not the line's: a last line may have none
		}
		if !tooLong && len(buf)+n > max {
			tooLong, buf = true, nil
		}
		if !tooLong {
			buf = append(buf, frag[:n]...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if len(buf) == 0 && !tooLong {
				return nil, false, io.EOF
			}
			return buf, tooLong, nil
		case err != nil:
			return nil, false, err
		}
		return buf, tooLong, nil
	}
}
