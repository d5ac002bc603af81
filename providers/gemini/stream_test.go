package gemini

import (
	"math/rand/v2"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

const sseDir = "../../testdata/sse/gemini"

// testReplay replays streams through a new testChat each time.
var testReplay = translatortest.Replay{
	New:     func(opts providers.StreamOptions) providers.StreamTranslator { return testChat().ChatStream(opts) },
	Framing: Framing,
}

// translate feeds upstream to a new translator in pieces of random sizes
// (rng nil: all at once), cut into events by Gemini's Framing as the
// gateway cuts them, and returns the unified stream. It stops at the first
// Event or framing error.
func translate(c Chat, opts providers.StreamOptions, upstream []byte, rng *rand.Rand) ([]byte, error) {
	return translatortest.Translate(c.ChatStream(opts), Framing, upstream, rng)
}

func TestStreamTranscripts(t *testing.T) {
	testReplay.Transcripts(t, sseDir)
}
