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
// while all are good writes them into work parts of at most set.PartLines
// requests. It returns the line errors when there are any; the parts
// written are then deleted again. The file is streamed: memory holds one
// line, one part, and the custom_ids seen.
func (s *Store) validate(ctx context.Context, rec *batchRecord, ex Executor, set Settings) (*validation, error) {
	v := &validation{models: rec.Models}
	_, rc, err := s.OpenFile(ctx, rec.Owner, rec.InputFileID)
	if errors.Is(err, ErrNotFound) {
		v.fail(0, "input_file_id", "file_not_found", fmt.Sprintf("the input file %s no longer exists", rec.InputFileID))
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()

	dir := s.batchDir(rec.Owner, rec.ID)
	var (
		br        = bufio.NewReaderSize(rc, 64<<10)
		seen      = make(map[string]struct{})
		part      []byte
		partStart int
		lineNo    int
		models    = make(map[string]struct{}, 1)
	)
	flush := func() error {
		if v.total == partStart {
			return nil
		}
		n := len(v.parts)
		v.parts = append(v.parts, partState{Start: partStart, N: v.total - partStart})
		partStart = v.total
		err := s.files.Store(ctx, path.Join(dir, "input", fmt.Sprintf("%06d", n)), part)
		part = part[:0]
		return err
	}
	for {
		line, tooLong, err := readLine(br, set.MaxLineBytes)
		if err == io.EOF && line == nil {
			break
		}
		if err != nil && err != io.EOF {
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
		part = append(part, line...)
		part = append(part, '\n')
		if v.total-partStart == set.PartLines || len(part) >= ChunkSize {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if v.total == 0 && len(v.errors) == 0 {
		v.fail(0, "input_file_id", "empty_file", "the input file holds no requests")
	}
	if len(v.errors) > 0 {
		_ = s.files.Delete(ctx, path.Join(dir, "input"))
		return v, nil
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(models) == 1 {
		for m := range models {
			v.model = m
		}
	}
	return v, nil
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
		case err == bufio.ErrBufferFull:
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
