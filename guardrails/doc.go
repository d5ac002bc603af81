// Package guardrails is modelgate's guard engine: named guards that look at
// the texts of requests and answers (prompts, tool-call arguments, tool
// results, embeddings inputs, rerank documents, batch lines, answers
// streamed or not) and allow them, mask what they find with a typed
// placeholder ("[EMAIL]"), refuse them, or log what they saw.
//
// A guard is one of four types:
//
//   - pii: built-in detectors for e-mail addresses, phone numbers, credit
//     card numbers (Luhn), IBANs (mod 97), IP addresses, US social security
//     numbers and secrets (provider keys, private keys, JWTs, modelgate's
//     own keys). They run in one pass per text, without regular
//     expressions.
//   - regex: a regular expression of the operator's, with a bounded span
//     for streams (max_span).
//   - webhook: an external screening service over HTTP (see docs/guardrails.md
//     for its protocol), with a timeout and an explicit on_error (fail open
//     or fail closed).
//   - moderation: a provider's moderation endpoint in OpenAI's shape,
//     reached through a Moderator the host implements over its upstream.
//
// The engine is Caddy-free and returns its decisions as data: a Result
// says whether a body is allowed (possibly masked), blocked (by which
// guard, why) or undecided (a guard could not decide and fails closed),
// and carries one Decision per guard applied, for metrics and events. The
// host maps them to statuses (Result.Error). Streamed answers are guarded
// as they flow: an AnswerStream takes the events of a chat, Responses or
// Messages stream and returns the events to send on, holding back only
// the text that may still be the start of a match.
package guardrails
