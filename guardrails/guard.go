package guardrails

import (
	"context"
	"regexp"
	"regexp/syntax"
	"strings"
	"time"
	"unicode/utf8"
)

// guard is one compiled guard.
type guard struct {
	name, typ         string
	request, response bool
	models            []string
	keys, accounts    map[string]bool
	action            Action
	failOpen          bool // on_error allow
	streamWindow      int
	index             int    // its place among the engine's guards
	tally             *Tally // its decisions, counted

	local    scanner  // pii and regex
	screener screener // webhook and moderation
}

// scanner finds what a pii or regex guard looks for in a text.
type scanner interface {
	// find appends the matches in text, in order, not overlapping.
	find(text string, dst []Match) []Match
	// hold is how many bytes at the end of text may still be part of a
	// match: what a stream holds back. text[from:] was added since the
	// stream's last call, and t is the stream's, for a scanner that
	// follows the end of the text as it grows.
	hold(text string, from int, t *runs) int
	// mayMatch reports whether a match may start at or after text[from]:
	// false only when none can, so that a stream need not look for any in
	// a piece without the bytes a match is made of.
	mayMatch(text string, from int) bool
	// placeholder is what masking puts in place of m.
	placeholder(m Match) string
	// reach is how far text must go on past m, found in it, for m to be
	// certain: a stream holds m back while text ends before reach plus
	// lookahead.
	reach(text string, m Match) int
}

// screener asks an outside service about texts (webhook, moderation).
type screener interface {
	screen(ctx context.Context, g *guard, in *input, texts []string) (screening, error)
}

// screening is a service's answer.
type screening struct {
	action Action   // Allow, Block or Mask
	reason string   // why it blocked
	texts  []string // the masked texts, for Mask
	found  []string // flagged categories
}

func newGuard(c *GuardConfig, opts Options) (*guard, error) {
	g := &guard{name: c.Name, typ: c.Type, models: c.Models, failOpen: c.OnError == "allow",
		streamWindow: c.StreamWindow}
	if g.streamWindow == 0 {
		g.streamWindow = defaultStreamWindow
	}
	g.request, g.response = len(c.Apply) == 0, len(c.Apply) == 0
	for _, a := range c.Apply {
		g.request = g.request || a == "request"
		g.response = g.response || a == "response"
	}
	g.keys, g.accounts = set(c.Keys), set(c.Accounts)
	timeout := time.Duration(c.Timeout)
	if timeout == 0 {
		timeout = defaultTimeout
	}
	switch c.Type {
	case "pii":
		g.action = parseAction(c.Action, Mask)
		kinds := Kinds()
		if len(c.Detect) > 0 {
			kinds = kinds[:0]
			for _, name := range c.Detect {
				k, _ := ParseKind(name) // checked by validate
				kinds = append(kinds, k)
			}
		}
		g.local = &piiScanner{NewDetectors(kinds...)}
	case "regex":
		g.action = parseAction(c.Action, Block)
		re := regexp.MustCompile(c.Pattern) // checked by validate
		rs := &regexScanner{re: re, span: c.MaxSpan, replacement: c.Replacement}
		rs.prefix, _ = re.LiteralPrefix()
		if rs.span == 0 {
			rs.span = defaultMaxSpan
			if n, bounded := patternSpan(c.Pattern); bounded {
				rs.span = min(n, maxMaxSpan)
			}
		}
		if rs.replacement == "" {
			rs.replacement = "[" + placeholderName(c.Name) + "]"
		}
		g.local = rs
	case "webhook":
		g.action = Block
		g.screener = newWebhook(c, timeout, opts.Client)
	case "moderation":
		g.action = parseAction(c.Action, Block)
		if opts.Moderator == nil {
			return nil, errNoModerator
		}
		g.screener = &moderation{m: opts.Moderator, provider: c.Provider, model: c.Model,
			categories: set(c.Categories), timeout: timeout}
	}
	return g, nil
}

// set makes a set of list; nil for an empty list (no filter).
func set(list []string) map[string]bool {
	if len(list) == 0 {
		return nil
	}
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

// placeholderName is name in capitals, other bytes than letters and
// digits as '_'.
func placeholderName(name string) string {
	b := []byte(strings.ToUpper(name))
	for i, c := range b {
		if !isAlnum(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

// applies reports whether g looks at bodies going dir for s.
func (g *guard) applies(dir Direction, s *Scope) bool {
	if dir == Request && !g.request || dir == Response && !g.response {
		return false
	}
	if s == nil {
		s = &Scope{}
	}
	if g.keys != nil && !g.keys[s.Key] || g.accounts != nil && !g.accounts[s.Account] {
		return false
	}
	return g.forModels(s.Models)
}

// mayApply reports whether g, in either direction, may apply to a call of
// one of models, whatever its key and account.
func (g *guard) mayApply(models []string) bool {
	return (g.request || g.response) && g.forModels(models)
}

// forModels reports whether g's models filter lets a call of one of models
// through (no filter lets every call through).
func (g *guard) forModels(models []string) bool {
	if g.models == nil {
		return true
	}
	for _, want := range g.models {
		for _, m := range models {
			if m == want || strings.HasSuffix(want, "/*") && strings.HasPrefix(m, want[:len(want)-1]) {
				return true
			}
		}
	}
	return false
}

// check applies g to vals, masking in place.
func (g *guard) check(ctx context.Context, in *input, vals []string) Decision {
	d := Decision{Guard: g.name, Index: g.index, Type: g.typ, Direction: in.dir, Action: Allow, Allowed: true, tally: g.tally}
	if g.local != nil {
		g.scan(in, vals, &d)
		return d
	}
	start := time.Now()
	sc, err := g.screener.screen(ctx, g, in, vals)
	d.Elapsed = time.Since(start)
	g.apply(sc, err, vals, &d)
	return d
}

// scan applies a local guard to vals.
func (g *guard) scan(in *input, vals []string, d *Decision) {
	for i, v := range vals {
		ms := g.local.find(v, in.matches[:0])
		if len(ms) == 0 {
			continue
		}
		in.matches = ms[:0]
		d.Matched = true
		d.Found = g.found(ms, d.Found)
		switch g.action {
		case Block:
			d.Action, d.Allowed, d.Reason = Block, false, g.reason(d.Found)
			return
		case Log:
			d.Action = Log
		case Mask:
			d.Action = Mask
			vals[i] = g.mask(v, ms)
		}
	}
}

// found adds the kinds of ms to kinds, each once.
func (g *guard) found(ms []Match, kinds []string) []string {
	if _, isRegex := g.local.(*regexScanner); isRegex {
		if len(kinds) == 0 {
			kinds = append(kinds, "pattern")
		}
		return kinds
	}
	for _, m := range ms {
		if k := m.Kind.String(); !contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// reason says what a local guard found, for the client.
func (g *guard) reason(found []string) string {
	if _, isRegex := g.local.(*regexScanner); isRegex {
		return "the text matches a banned pattern"
	}
	return "the text contains " + strings.Join(found, ", ")
}

// mask returns text with each match replaced by its placeholder.
func (g *guard) mask(text string, ms []Match) string {
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, m := range ms {
		b.WriteString(text[last:m.Start])
		b.WriteString(g.local.placeholder(m))
		last = m.End
	}
	b.WriteString(text[last:])
	return b.String()
}

// apply turns a service's answer into d, masking vals in place.
func (g *guard) apply(sc screening, err error, vals []string, d *Decision) {
	if err == nil && sc.action == Mask && len(sc.texts) != len(vals) {
		err = errMaskCount
	}
	if err != nil {
		d.Action, d.Err, d.Allowed = Error, err, g.failOpen
		return
	}
	d.Found = sc.found
	switch sc.action {
	case Block:
		d.Matched = true
		if g.action == Log {
			d.Action = Log
			return
		}
		d.Action, d.Allowed, d.Reason = Block, false, sc.reason
	case Mask:
		for i := range vals {
			if sc.texts[i] != vals[i] {
				d.Matched, d.Action = true, Mask
				vals[i] = sc.texts[i]
			}
		}
	}
}

// piiScanner is a pii guard's scanner: the built-in detectors.
type piiScanner struct{ d Detectors }

func (p *piiScanner) find(text string, dst []Match) []Match   { return p.d.Find(text, dst) }
func (p *piiScanner) hold(text string, from int, t *runs) int { return p.d.hold(text, from, t) }
func (p *piiScanner) mayMatch(text string, from int) bool     { return p.d.mayMatch(text[from:]) }
func (p *piiScanner) placeholder(m Match) string              { return m.Kind.Placeholder() }
func (p *piiScanner) reach(text string, m Match) int          { return p.d.reach(text, m) }

// regexScanner is a regex guard's scanner.
type regexScanner struct {
	re          *regexp.Regexp
	prefix      string // what every match starts with, when known
	span        int
	replacement string
}

func (r *regexScanner) find(text string, dst []Match) []Match {
	for _, loc := range r.re.FindAllStringIndex(text, -1) {
		if loc[1] > loc[0] {
			dst = append(dst, Match{Start: loc[0], End: loc[1]})
		}
	}
	return dst
}

func (r *regexScanner) hold(text string, _ int, _ *runs) int { return min(r.span, len(text)) }

// mayMatch: a match that starts at or after from starts with the
// pattern's literal prefix, which must then be there.
func (r *regexScanner) mayMatch(text string, from int) bool {
	return r.prefix == "" || strings.Contains(text[from:], r.prefix)
}

func (r *regexScanner) placeholder(Match) string { return r.replacement }

// reach: m's end; a longer match that more text could make lies within
// the pattern's span, which hold keeps back.
func (r *regexScanner) reach(_ string, m Match) int { return m.End }

// patternSpan returns the longest match of pattern in bytes, and false
// when it has none (a *, + or {n,} repeats without bound).
func patternSpan(pattern string) (int, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, false
	}
	n := span(re.Simplify())
	return n, n >= 0
}

// span is the longest match of re in bytes, or -1 when unbounded.
func span(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return len(re.Rune) * utf8.UTFMax
		}
		n := 0
		for _, r := range re.Rune {
			n += utf8.RuneLen(r)
		}
		return n
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return 0
		}
		return utf8.RuneLen(min(re.Rune[len(re.Rune)-1], utf8.MaxRune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return span(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			k := span(s)
			if k < 0 {
				return -1
			}
			n += k
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			k := span(s)
			if k < 0 {
				return -1
			}
			n = max(n, k)
		}
		return n
	case syntax.OpRepeat:
		if re.Max < 0 {
			return -1
		}
		k := span(re.Sub[0])
		if k < 0 {
			return -1
		}
		return k * re.Max
	case syntax.OpStar, syntax.OpPlus:
		return -1
	}
	return 0 // empty-width operators
}
