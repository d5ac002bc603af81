package bedrock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/modelgate/modelgate/providers"
)

// EventStreamContentType is the media type of AWS's binary event stream.
const EventStreamContentType = "application/vnd.amazon.eventstream"

// EventStream is the framing of ConverseStream's answer, AWS's binary event
// stream: each event is one message of a prelude (total length, headers
// length, prelude CRC), headers, a payload and a message CRC. Cut hands on
// whole messages, as raw bytes; it reads the total length from the prelude
// to know whether a message has fully arrived (so it never waits on a
// partial one) and checks the message with aws-sdk-go-v2's
// eventstream.Decoder, so a corrupt one (a CRC mismatch, lengths that do
// not add up) is an error.
var EventStream providers.Framing = eventStreamFraming{}

type eventStreamFraming struct{}

const (
	// preludeLen is the prelude's size: total length, headers length and
	// the prelude's CRC, 4 bytes each.
	preludeLen = 12
	// minMessageLen is a message without headers or payload: the prelude
	// and the message CRC.
	minMessageLen = preludeLen + 4
	// MaxMessageLen is the largest event-stream message Cut accepts: AWS's
	// limit of 16 MiB (aws-c-event-stream's AWS_EVENT_STREAM_MAX_MESSAGE_SIZE).
	MaxMessageLen = 16 << 20
)

// decoder decodes event-stream messages; it keeps no state between calls.
var decoder = eventstream.NewDecoder()

func (eventStreamFraming) IsStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
		mt = strings.TrimSpace(mt)
	}
	return strings.EqualFold(mt, EventStreamContentType)
}

// Cut returns the first whole message in buf and the bytes after it.
func (eventStreamFraming) Cut(buf []byte) (event, rest []byte, ok bool, err error) {
	if len(buf) < preludeLen {
		return nil, buf, false, nil
	}
	total := binary.BigEndian.Uint32(buf)
	if total < minMessageLen || total > MaxMessageLen {
		return nil, buf, false, fmt.Errorf("bedrock: event stream message length %d is out of range", total)
	}
	if uint64(len(buf)) < uint64(total) {
		// Not all there yet. Check the prelude now, so garbage is an error
		// at once rather than a wait for as many bytes as it claims.
		if _, err := decoder.Decode(bytes.NewReader(buf[:preludeLen]), nil); err != nil && !isEOF(err) {
			return nil, buf, false, fmt.Errorf("bedrock: event stream message prelude: %w", err)
		}
		return nil, buf, false, nil
	}
	msg := buf[:total:total]
	if _, err := decodeMessage(msg, nil); err != nil {
		return nil, buf, false, err
	}
	return msg, buf[total:], true, nil
}

// decodeMessage decodes one whole message with the SDK's decoder; the
// payload is written into payloadBuf's array where it fits.
func decodeMessage(msg, payloadBuf []byte) (eventstream.Message, error) {
	m, err := decoder.Decode(bytes.NewReader(msg), payloadBuf)
	if err != nil {
		if isEOF(err) {
			// The message's own lengths point past its end.
			err = errors.New("lengths do not add up")
		}
		return m, fmt.Errorf("bedrock: event stream message: %w", err)
	}
	return m, nil
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// headerString returns a string-valued header, or "" when it is missing or
// of another type.
func headerString(hs eventstream.Headers, name string) string {
	if v, ok := hs.Get(name).(eventstream.StringValue); ok {
		return string(v)
	}
	return ""
}
