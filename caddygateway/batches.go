package caddygateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
)

// This file serves OpenAI's Batch API:
//
//	POST /v1/batches              create (input_file_id, endpoint, completion_window, metadata)
//	GET  /v1/batches              list, newest first (after, limit)
//	GET  /v1/batches/{id}         one batch, with its progress
//	POST /v1/batches/{id}/cancel  cancel it
//
// The batch runner of the modelgate app validates and runs batches in the
// background.

func (h *Handler) serveBatches(w http.ResponseWriter, r *http.Request, rest string) {
	who, ok := owner(w, r)
	if !ok {
		return
	}
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case id == "":
		switch r.Method {
		case http.MethodPost:
			h.createBatch(w, r, who)
		case http.MethodGet, http.MethodHead:
			h.listBatches(w, r, who)
		default:
			AllowMethod(w, r, http.MethodGet, http.MethodPost)
		}
	case sub == "":
		if !AllowMethod(w, r, http.MethodGet) {
			return
		}
		b, err := h.app.store.GetBatch(r.Context(), who, id)
		h.answer(w, "batch", id, b, err)
	case sub == "cancel":
		if !AllowMethod(w, r, http.MethodPost) {
			return
		}
		b, err := h.app.store.CancelBatch(r.Context(), who, id)
		if err == nil {
			h.logger.Info("batch cancel asked for", zap.String("batch_id", id))
			h.app.wakeRunner()
			h.app.publish(channelBatches, id)
		}
		h.answer(w, "batch", id, b, err)
	default:
		writeError(w, notFound("path", "no such path: "+r.URL.Path))
	}
}

func (h *Handler) createBatch(w http.ResponseWriter, r *http.Request, who string) {
	body, perr := readBody(r, 1<<20)
	if perr != nil {
		writeError(w, perr)
		return
	}
	var in struct {
		InputFileID        string            `json:"input_file_id"`
		Endpoint           string            `json:"endpoint"`
		CompletionWindow   string            `json:"completion_window"`
		Metadata           map[string]string `json:"metadata"`
		OutputExpiresAfter *struct {
			Anchor  string          `json:"anchor"`
			Seconds json.RawMessage `json:"seconds"`
		} `json:"output_expires_after"`
	}
	if !providers.ValidJSON(body) {
		writeError(w, BadRequest("", "the body is not valid JSON"))
		return
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, BadRequest("", "the body is not a batch request: "+err.Error()))
		return
	}
	switch {
	case in.InputFileID == "":
		writeError(w, BadRequest("input_file_id", "input_file_id is required"))
		return
	case in.Endpoint == "":
		writeError(w, BadRequest("endpoint", "endpoint is required"))
		return
	case in.CompletionWindow == "":
		writeError(w, BadRequest("completion_window", "completion_window is required"))
		return
	}
	window, err := time.ParseDuration(in.CompletionWindow)
	if err != nil || window <= 0 {
		writeError(w, BadRequest("completion_window", "completion_window is a duration such as 24h"))
		return
	}
	window = min(window, time.Duration(h.app.Batch.CompletionWindow))
	var outputTTL time.Duration
	if e := in.OutputExpiresAfter; e != nil {
		if outputTTL, perr = (expiresAfter{given: true, anchor: e.Anchor, seconds: string(e.Seconds)}).duration("output_expires_after"); perr != nil {
			writeError(w, perr)
			return
		}
	}
	// A batch writes results for its owner: one at its storage quota
	// already has no room for them.
	if _, perr := h.app.storageRoom(r.Context(), who, ""); perr != nil {
		writeError(w, perr)
		return
	}
	params := batch.CreateParams{
		InputFileID: in.InputFileID, Endpoint: in.Endpoint, CompletionWindow: in.CompletionWindow,
		Metadata: in.Metadata, Window: window, OutputExpiresAfter: outputTTL,
	}
	if k := requestKey(r); k != nil {
		params.Models, params.KeyID, params.KeyName = k.Models, k.ID, k.Name
	}
	b, err := h.app.store.CreateBatch(r.Context(), who, params)
	if err == nil {
		h.logger.Info("batch created", zap.String("batch_id", b.ID), zap.String("input_file_id", b.InputFileID))
		h.app.batchEvent("batch_submitted", who, b)
		h.app.wakeRunner()
		h.app.publish(channelBatches, b.ID)
	}
	h.answer(w, "batch", "", b, err)
}

func (h *Handler) listBatches(w http.ResponseWriter, r *http.Request, who string) {
	q := r.URL.Query()
	opt := batch.ListOptions{After: q.Get("after")}
	var perr *providers.Error
	if opt.Limit, perr = limitParam(q.Get("limit"), 20, 100); perr != nil {
		writeError(w, perr)
		return
	}
	page, err := h.app.store.ListBatches(r.Context(), who, opt)
	if err != nil {
		h.internalError(w, "listing batches", err)
		return
	}
	writeList(w, page, func(b batch.Batch) string { return b.ID })
}

// wakeRunner makes the batch runner look for work now.
func (a *App) wakeRunner() {
	if a.runner != nil {
		a.runner.Wake()
	}
}
