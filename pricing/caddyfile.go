package pricing

import (
	"errors"
	"fmt"
	"strconv"
)

// UnmarshalLine reads one line of the Caddyfile's prices block, given as
// its tokens, subdirective first. pricing imports nothing of Caddy: the
// host walks the block with its Dispenser and passes each line, wrapping
// an error with the line's position:
//
//	case "prices":
//	    for nesting := d.Nesting(); d.NextBlock(nesting); {
//	        line := append([]string{d.Val()}, d.RemainingArgs()...)
//	        if err := a.Prices.UnmarshalLine(line); err != nil {
//	            return d.Errf("prices: %v", err)
//	        }
//	    }
//
// The lines:
//
//	file <path>
//	cache_hit <usd>
//	model <type>/<model> [input <usd>] [cached <usd>] [cache_write <usd>]
//	      [cache_write_1h <usd>] [output <usd>] [embedding <usd>] [search <usd>]
//	      [cache_hit <usd>] [alias <name>]... [source <url>]
//	      [above <tokens> [input <usd>] [cached <usd>] [cache_write <usd>]
//	                      [cache_write_1h <usd>] [output <usd>]]...
//
// Rates are US dollars per million tokens, search per 1,000 searches,
// cache_hit per 1,000 requests answered from the gateway's response cache
// (the line of its own: for every model without a cache_hit of its own).
// What follows "above <tokens>" is a long-context tier, up to the next
// "above". A model named twice, a file or cache_hit given twice or a rate
// given twice in one line is an error; so is a line that prices nothing.
func (c *Config) UnmarshalLine(tokens []string) error {
	if len(tokens) == 0 {
		return errors.New("empty line")
	}
	switch tokens[0] {
	case "file":
		if len(tokens) != 2 {
			return errors.New("file takes one argument: the path of a JSON price file")
		}
		if c.File != "" {
			return fmt.Errorf("file is given twice (%s and %s)", c.File, tokens[1])
		}
		c.File = tokens[1]
		return nil
	case "cache_hit":
		if len(tokens) != 2 {
			return errors.New("cache_hit takes one argument: US dollars per 1,000 requests answered from the response cache")
		}
		if c.CacheHit != nil {
			return errors.New("cache_hit is given twice")
		}
		r, err := ParseRate(tokens[1])
		if err != nil {
			return fmt.Errorf("cache_hit: %w", err)
		}
		c.CacheHit = &r
		return nil
	case "model":
		if len(tokens) < 2 {
			return errors.New("model needs <provider type>/<model> and its prices, such as: model openai/gpt-4o input 2.50 cached 1.25 output 10")
		}
		key := tokens[1]
		typ, model, err := splitKey(key)
		if err != nil {
			return err
		}
		if _, dup := c.Models[key]; dup {
			return fmt.Errorf("model %s is priced twice", key)
		}
		pr, err := parseModelLine(tokens[2:])
		if err != nil {
			return fmt.Errorf("model %s: %w", key, err)
		}
		// Validate the entry as the table would, so errors point here.
		t := &Table{Providers: map[string]*ProviderPrices{typ: {Models: map[string]*Price{model: pr}}}}
		if err := t.Validate(); err != nil {
			return err
		}
		if c.Models == nil {
			c.Models = make(map[string]*Price)
		}
		c.Models[key] = pr
		return nil
	default:
		return fmt.Errorf("unrecognized prices option %q (file, cache_hit or model)", tokens[0])
	}
}

func parseModelLine(args []string) (*Price, error) {
	pr := new(Price)
	var tier *Tier
	// rate finds the field a rate keyword sets, in the model or the tier.
	rate := func(kw string) (**Rate, bool) {
		if tier != nil {
			switch kw {
			case "input":
				return &tier.Input, true
			case "cached":
				return &tier.Cached, true
			case "cache_write":
				return &tier.CacheWrite, true
			case "cache_write_1h":
				return &tier.CacheWrite1h, true
			case "output":
				return &tier.Output, true
			}
			return nil, false
		}
		switch kw {
		case "input":
			return &pr.Input, true
		case "cached":
			return &pr.Cached, true
		case "cache_write":
			return &pr.CacheWrite, true
		case "cache_write_1h":
			return &pr.CacheWrite1h, true
		case "output":
			return &pr.Output, true
		case "embedding":
			return &pr.Embedding, true
		case "search":
			return &pr.Search, true
		case "cache_hit":
			return &pr.CacheHit, true
		}
		return nil, false
	}
	finishTier := func() {
		if tier != nil {
			pr.Tiers = append(pr.Tiers, *tier)
			tier = nil
		}
	}
	for i := 0; i < len(args); i += 2 {
		kw := args[i]
		if i+1 >= len(args) {
			return nil, fmt.Errorf("%s needs a value", kw)
		}
		val := args[i+1]
		if dst, ok := rate(kw); ok {
			if *dst != nil {
				return nil, fmt.Errorf("%s is given twice%s", kw, inTier(tier))
			}
			r, err := ParseRate(val)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", kw, err)
			}
			*dst = &r
			continue
		}
		switch kw {
		case "above":
			finishTier()
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("above %q: give the prompt length in tokens, such as 200000", val)
			}
			tier = &Tier{Above: n}
		case "alias", "source", "embedding", "search", "cache_hit":
			if tier != nil {
				return nil, fmt.Errorf("%s belongs before the first above: a tier takes only input, cached, cache_write, cache_write_1h and output", kw)
			}
			if kw == "alias" {
				pr.Aliases = append(pr.Aliases, val)
				continue
			}
			if pr.Source != "" {
				return nil, errors.New("source is given twice")
			}
			pr.Source = val
		default:
			return nil, fmt.Errorf("unknown price field %q (input, cached, cache_write, cache_write_1h, output, embedding, search, cache_hit, alias, source, above)", kw)
		}
	}
	finishTier()
	return pr, nil
}

func inTier(t *Tier) string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf(" in the tier above %d", t.Above)
}
