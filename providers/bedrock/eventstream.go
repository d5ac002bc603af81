package bedrock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"

	"github.com/modelgate/modelgate/providers"
)

// EventStreamContentType is the media type of AWS's binary event stream.
const EventStreamContentType = "application/vnd.amazon.eventstream"

// EventStream is the framing of ConverseStream's answer, AWS's binary event
// stream: each message is a prelude (total length, headers length, prelude
// CRC), headers, a payload and a message CRC.
//
// Cut reads the total length from the prelude to know whether a whole
// message has arrived, so it never waits on a partial one (a partial
// message's prelude is checked at once, so garbage is an error rather than
// a wait for as many bytes as it claims). A whole message is decoded with
// aws-sdk-go-v2's eventstream.Decoder, which checks both CRCs and the
// lengths; a corrupt message is an error. What Cut hands on is the decoded
// message, for this package's StreamTranslator: the message kind (event,
// exception, error), its type and its payload (see appendEvent).
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

// payloadBufs hold the payloads the decoder writes, between the decoding
// and the copy into the event handed on.
var payloadBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 4096)
	return &b
}}

func (eventStreamFraming) IsStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
		mt = strings.TrimSpace(mt)
	}
	return strings.EqualFold(mt, EventStreamContentType)
}

// Cut returns the first whole message in buf, decoded, and the bytes after
// it.
func (eventStreamFraming) Cut(buf []byte) (event, rest []byte, ok bool, err error) {
	if len(buf) < preludeLen {
		return nil, buf, false, nil
	}
	total := binary.BigEndian.Uint32(buf)
	if total < minMessageLen || total > MaxMessageLen {
		return nil, buf, false, fmt.Errorf("bedrock: event stream message length %d is out of range", total)
	}
	if uint64(len(buf)) < uint64(total) {
		if _, err := decoder.Decode(bytes.NewReader(buf[:preludeLen]), nil); err != nil && !isEOF(err) {
			return nil, buf, false, fmt.Errorf("bedrock: event stream message prelude: %w", err)
		}
		return nil, buf, false, nil
	}
	pb := payloadBufs.Get().(*[]byte)
	defer payloadBufs.Put(pb)
	msg, err := decoder.Decode(bytes.NewReader(buf[:total]), (*pb)[:0])
	if err != nil {
		if isEOF(err) {
			err = errors.New("its lengths point past its end") // a message's own lengths do not add up
		}
		return nil, buf, false, fmt.Errorf("bedrock: event stream message: %w", err)
	}
	if cap(msg.Payload) <= 1<<16 {
		*pb = msg.Payload[:0] // keep a grown buffer, within reason
	}
	return decodedEvent(msg), buf[total:], true, nil
}

// Kinds of decoded message, the first byte of an event Cut hands on.
const (
	kindEvent     = 'E' // :message-type event; name is :event-type
	kindException = 'X' // :message-type exception; name is :exception-type
	kindError     = 'R' // :message-type error; name is :error-code, the payload :error-message
	kindOther     = 'U' // another :message-type, which name holds
	kindUntyped   = '-' // no :message-type header
)

// decodedEvent is what Cut hands on for a decoded message:
//
//	kind (1 byte) | len(name) (2 bytes, big-endian) | name | payload
//
// Header values, and so names, are at most 32767 bytes long.
func decodedEvent(msg eventstream.Message) []byte {
	kind, name, payload := byte(kindUntyped), "", msg.Payload
	switch mt := headerString(msg.Headers, eventstreamapi.MessageTypeHeader); mt {
	case eventstreamapi.EventMessageType:
		kind, name = kindEvent, headerString(msg.Headers, eventstreamapi.EventTypeHeader)
	case eventstreamapi.ExceptionMessageType:
		kind, name = kindException, headerString(msg.Headers, eventstreamapi.ExceptionTypeHeader)
	case eventstreamapi.ErrorMessageType:
		kind, name = kindError, headerString(msg.Headers, eventstreamapi.ErrorCodeHeader)
		payload = []byte(headerString(msg.Headers, eventstreamapi.ErrorMessageHeader))
	case "":
	default:
		kind, name = kindOther, mt
	}
	ev := make([]byte, 3, 3+len(name)+len(payload))
	ev[0] = kind
	binary.BigEndian.PutUint16(ev[1:], uint16(len(name)))
	ev = append(ev, name...)
	return append(ev, payload...)
}

// parseEvent splits an event Cut handed on.
func parseEvent(ev []byte) (kind byte, name string, payload []byte, err error) {
	if len(ev) < 3 {
		return 0, "", nil, errMalformedEvent
	}
	n := int(binary.BigEndian.Uint16(ev[1:]))
	if len(ev) < 3+n {
		return 0, "", nil, errMalformedEvent
	}
	switch ev[0] {
	case kindEvent, kindException, kindError, kindOther, kindUntyped:
	default:
		return 0, "", nil, errMalformedEvent
	}
	return ev[0], string(ev[3 : 3+n]), ev[3+n:], nil
}

var errMalformedEvent = errors.New("bedrock: not an event as EventStream cuts it")

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
