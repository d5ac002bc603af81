package gemini

import (
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

func TestStreamTranscripts(t *testing.T) {
	testReplay.Transcripts(t, sseDir)
}
