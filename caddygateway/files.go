package caddygateway

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/providers"
)

// This file serves OpenAI's Files API (for batch input and results):
//
//	POST   /v1/files               multipart upload, purpose=batch
//	GET    /v1/files               list (purpose, limit, order, after)
//	GET    /v1/files/{id}          one file
//	DELETE /v1/files/{id}          delete it
//	GET    /v1/files/{id}/content  its bytes
//
// Files belong to the owner of the key that uploaded them (a static key's
// owner is apart from every managed key's: see Key.StorageOwner); other
// owners get 404. Uploads and downloads are streamed through the storage in parts.

// multipartSlack is what a multipart body may add to a file's size
// (boundaries, part headers, the purpose field).
const multipartSlack = 64 << 10

// owner returns the owner the request's key keeps its files, batches and
// stored responses under (Key.StorageOwner), or answers 401: they need to
// know whose they are.
func owner(w http.ResponseWriter, r *http.Request) (string, bool) {
	if k, ok := caddyhttp.GetVar(r.Context(), ctxKeyVar).(*Key); ok && k != nil {
		return k.StorageOwner(), true
	}
	writeError(w, &providers.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "files and batches belong to an API key's owner: this route needs modelgate_auth before modelgate"})
	return "", false
}

func (h *Handler) serveFiles(w http.ResponseWriter, r *http.Request, rest string) {
	who, ok := owner(w, r)
	if !ok {
		return
	}
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case id == "":
		switch r.Method {
		case http.MethodPost:
			h.createFile(w, r, who)
		case http.MethodGet, http.MethodHead:
			h.listFiles(w, r, who)
		default:
			AllowMethod(w, r, http.MethodGet, http.MethodPost)
		}
	case sub == "":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			f, err := h.app.store.GetFile(r.Context(), who, id)
			h.answer(w, "file", id, f, err)
		case http.MethodDelete:
			f, err := h.app.store.DeleteFile(r.Context(), who, id)
			if err == nil {
				h.app.countStored(r.Context(), who, -f.Bytes)
			}
			h.answer(w, "file", id, map[string]any{"id": id, "object": "file", "deleted": true}, err)
		default:
			AllowMethod(w, r, http.MethodGet, http.MethodDelete)
		}
	case sub == "content":
		if !AllowMethod(w, r, http.MethodGet) {
			return
		}
		h.fileContent(w, r, who, id)
	default:
		writeError(w, notFound("path", "no such path: "+r.URL.Path))
	}
}

// endpointFiles is POST /v1/files to the limits: a request that costs
// nothing, counted against requests per minute.
const endpointFiles = gateway.APIFiles

func (h *Handler) createFile(w http.ResponseWriter, r *http.Request, who string) {
	done, ok := h.app.admitRequest(w, r, requestKey(r), endpointFiles)
	if !ok {
		return
	}
	defer done()
	limit := h.app.Batch.MaxFileSize
	if r.ContentLength > limit+multipartSlack {
		writeError(w, fileTooLarge(limit))
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "multipart/form-data" {
		writeError(w, BadRequest("", "POST /v1/files takes multipart/form-data with the fields file and purpose"))
		return
	}
	// An owner at its storage quota is refused before the upload is
	// read; one near it may upload what is left.
	room, perr := h.app.storageRoom(r.Context(), who, "file")
	if perr != nil {
		writeError(w, perr)
		return
	}
	readLimit := limit
	if room >= 0 && room < limit {
		readLimit = room
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, BadRequest("", "the multipart body could not be read: "+err.Error()))
		return
	}
	var (
		purpose string
		expiry  expiresAfter
		pending *batch.PendingFile
	)
	discard := func() {
		if pending != nil {
			pending.Discard(r.Context())
		}
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			discard()
			writeError(w, BadRequest("", "the multipart body could not be read"))
			return
		}
		switch part.FormName() {
		case "purpose":
			purpose = formValue(part)
		case "expires_after[anchor]":
			expiry.anchor, expiry.given = formValue(part), true
		case "expires_after[seconds]":
			expiry.seconds, expiry.given = formValue(part), true
		case "file":
			if pending != nil {
				discard()
				writeError(w, BadRequest("file", "send one file per upload"))
				return
			}
			pending, err = h.app.store.UploadFile(r.Context(), who, part.FileName(), part, readLimit)
			switch {
			case errors.Is(err, batch.ErrTooLarge) && readLimit < limit:
				quota := h.app.StorageQuota.limit(who)
				writeError(w, gateway.QuotaExceeded("file", quota-readLimit, quota))
				return
			case errors.Is(err, batch.ErrTooLarge):
				writeError(w, fileTooLarge(limit))
				return
			case errors.Is(err, batch.ErrUnreadable):
				// The body ended before its closing boundary (an upload
				// cut short) or could not be read: nothing was kept.
				writeError(w, BadRequest("file", "the multipart body ended early or could not be read: send the whole file again"))
				return
			case err != nil:
				h.internalError(w, "storing an upload", err)
				return
			}
		}
		_ = part.Close()
	}
	ttl, perr := expiry.duration("expires_after")
	switch {
	case pending == nil:
		writeError(w, BadRequest("file", "the upload has no file field"))
		return
	case purpose != batch.PurposeBatch:
		discard()
		writeError(w, BadRequest("purpose", fmt.Sprintf("purpose %q is not supported: modelgate stores files with purpose %q", purpose, batch.PurposeBatch)))
		return
	case perr != nil:
		discard()
		writeError(w, perr)
		return
	}
	pending.ExpireAfter(ttl)
	// Counted against the quota before it is a file, at once across
	// instances: of two uploads that each fit alone, the second may not.
	release, perr := h.app.reserveStorage(r.Context(), who, "file", pending.Bytes())
	if perr != nil {
		discard()
		writeError(w, perr)
		return
	}
	f, err := pending.Commit(r.Context(), purpose)
	if err != nil {
		release()
		h.internalError(w, "recording an upload", err)
		return
	}
	h.logger.Info("file uploaded", zap.String("file_id", f.ID), zap.Int64("bytes", f.Bytes))
	WriteValue(w, http.StatusOK, f)
}

// formValue reads a short form field of a multipart upload.
func formValue(part io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(part, 64))
	return strings.TrimSpace(string(b))
}

// expiresAfter is OpenAI's expiration policy of an upload
// (expires_after) or of a batch's results (output_expires_after): an
// anchor, which must be created_at, and a number of seconds.
type expiresAfter struct {
	given   bool
	anchor  string
	seconds string
}

// OpenAI's bounds of expires_after.seconds: an hour to 30 days.
const (
	minExpiresAfter = 3600
	maxExpiresAfter = 2592000
)

// duration checks the policy as OpenAI does and returns how long after
// its anchor the file expires; 0 when none was given.
func (e expiresAfter) duration(param string) (time.Duration, *providers.Error) {
	if !e.given {
		return 0, nil
	}
	if e.anchor != "" && e.anchor != "created_at" {
		return 0, BadRequest(param+".anchor", fmt.Sprintf("%s.anchor %q is not supported: the one anchor is created_at", param, e.anchor))
	}
	n, err := strconv.ParseInt(e.seconds, 10, 64)
	if err != nil || n < minExpiresAfter || n > maxExpiresAfter {
		return 0, BadRequest(param+".seconds", fmt.Sprintf("%s.seconds must be a whole number of seconds from %d (an hour) to %d (30 days)", param, minExpiresAfter, maxExpiresAfter))
	}
	return time.Duration(n) * time.Second, nil
}

func (h *Handler) listFiles(w http.ResponseWriter, r *http.Request, who string) {
	q := r.URL.Query()
	opt := batch.ListOptions{Purpose: q.Get("purpose"), After: q.Get("after"), Order: q.Get("order")}
	var perr *providers.Error
	if opt.Limit, perr = limitParam(q.Get("limit"), 10000, 10000); perr != nil {
		writeError(w, perr)
		return
	}
	if opt.Order != "" && opt.Order != "asc" && opt.Order != "desc" {
		writeError(w, BadRequest("order", "order is asc or desc"))
		return
	}
	page, err := h.app.store.ListFiles(r.Context(), who, opt)
	if err != nil {
		h.internalError(w, "listing files", err)
		return
	}
	writeList(w, page, func(f batch.File) string { return f.ID })
}

func (h *Handler) fileContent(w http.ResponseWriter, r *http.Request, who, id string) {
	f, rc, err := h.app.store.OpenFile(r.Context(), who, id)
	if err != nil {
		h.answer(w, "file", id, nil, err)
		return
	}
	defer func() { _ = rc.Close() }()
	hdr := w.Header()
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, rc); err != nil && r.Context().Err() == nil {
		// The status is out: all that can be done is to cut the body short.
		h.logger.Error("sending file content", zap.String("file_id", id), zap.Error(err))
		panic(http.ErrAbortHandler)
	}
}

// answer writes v as JSON, or the error err stands for.
func (h *Handler) answer(w http.ResponseWriter, kind, id string, v any, err error) {
	var inv *batch.InvalidError
	switch {
	case err == nil:
		WriteValue(w, http.StatusOK, v)
	case errors.Is(err, batch.ErrNotFound):
		writeError(w, notFound("id", fmt.Sprintf("No such %s: %s", kind, id)))
	case errors.As(err, &inv):
		writeError(w, BadRequest(inv.Param, inv.Message))
	case errors.Is(err, batch.ErrNotCancellable):
		writeError(w, &providers.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "batch_not_cancellable",
			Message: fmt.Sprintf("batch %s has already ended and cannot be cancelled", id)})
	default:
		h.internalError(w, "serving "+kind+" "+id, err)
	}
}

// internalError logs err and answers 500 without its text, which may name
// storage paths; or 503 with retry-after when the storage cannot be
// reached (Redis down): clients try again, and it is back in a moment.
func (h *Handler) internalError(w http.ResponseWriter, doing string, err error) {
	h.logger.Error(doing, zap.Error(err))
	if StorageUnreachable(err) {
		writeStorageUnreachable(w, doing, writeError)
		return
	}
	writeError(w, &providers.Error{Status: http.StatusInternalServerError, Type: "server_error",
		Message: "the gateway failed " + doing})
}

// writeStorageUnreachable answers 503 with retry-after: 1 for a request
// that needs the storage while it cannot be reached, through write (the
// error writer of the request's API).
func writeStorageUnreachable(w http.ResponseWriter, doing string, write func(http.ResponseWriter, *providers.Error)) {
	w.Header().Set("Retry-After", "1")
	write(w, &providers.Error{Status: http.StatusServiceUnavailable, Type: "server_error",
		Message: "the gateway's storage cannot be reached just now (" + doing + "); try again shortly"})
}

// writeList writes a page in OpenAI's list shape.
func writeList[T any](w http.ResponseWriter, page batch.Page[T], id func(T) string) {
	out := struct {
		Object  string  `json:"object"`
		Data    []T     `json:"data"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
		HasMore bool    `json:"has_more"`
	}{Object: "list", Data: page.Data, HasMore: page.HasMore}
	if out.Data == nil {
		out.Data = []T{}
	}
	if n := len(page.Data); n > 0 {
		first, last := id(page.Data[0]), id(page.Data[n-1])
		out.FirstID, out.LastID = &first, &last
	}
	WriteValue(w, http.StatusOK, out)
}

// limitParam parses a list's limit: 1..max, def when absent.
func limitParam(s string, def, max int) (int, *providers.Error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, BadRequest("limit", fmt.Sprintf("limit must be a whole number from 1 to %d", max))
	}
	return n, nil
}

func fileTooLarge(limit int64) *providers.Error {
	return &providers.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "file_too_large",
		Message: fmt.Sprintf("the file is larger than %d bytes, the most this gateway accepts", limit)}
}
