package providers

import (
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/sse"
)

// Deprecated fragment helpers, kept while the translators move to the
// typed writers.

// Append appends the unified usage object.
//
// Deprecated: use Write.
func (u Usage) Append(b []byte) []byte {
	w := jsonw.New(b)
	u.Write(w.Value())
	b, _ = w.Finish()
	return b
}

// AppendChunkEnd appends the end of a unified chunk.
//
// Deprecated: use Chunks.
func AppendChunkEnd(dst []byte, finish string, includeUsage bool) []byte {
	dst = append(dst, `,"finish_reason":`...)
	if finish == "" {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '"')
		dst = append(dst, finish...)
		dst = append(dst, '"')
	}
	dst = append(dst, "}]"...)
	if includeUsage {
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

// AppendUsageChunk appends the usage chunk.
//
// Deprecated: use Chunks.End.
func AppendUsageChunk(dst, head []byte, u Usage) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, head...)
	dst = append(dst, `"choices":[],"usage":`...)
	dst = u.Append(dst)
	return append(dst, "}\n\n"...)
}

// AppendStreamIncomplete appends the stream_incomplete error event.
//
// Deprecated: use Chunks.Incomplete.
func AppendStreamIncomplete(dst []byte) []byte {
	return sse.AppendData(dst, StreamIncomplete().JSON())
}

// Append appends the joined text.
//
// Deprecated: use Write.
func (j *TextJoin) Append(dst []byte) []byte {
	w := jsonw.New(dst)
	j.Write(w.Value())
	dst, _ = w.Finish()
	return dst
}
