// Package providerkit is the conformance kit of modelgate's provider
// contract: the checks a provider type's translator passes, whether it
// lives in this repository or in a Go module of its own. A provider
// author's tests import it, with package providertest (the fake provider,
// whose table of wire formats a third party's format joins through
// providertest.Register) and package caddykit (the Caddyfile and gateway
// helpers).
//
// RunChat runs the standard checks on a providers.Chat translator, given
// one answer of the provider, the same answer streamed, and its errors:
// requests translate into the provider's request, answers and streams
// translate back into the unified shapes a client's SDK reads, with usage
// as numbers the gateway meters, errors map into the unified error without
// copying what is not JSON, and odd input gets an error, never a panic or
// invalid JSON. FuzzChatRequest, FuzzChatResponse and FuzzStream are the
// fuzz loops of the same checks.
//
// The smaller checks RunChat is made of are exported for tests of their
// own: ValidUnifiedStream and CheckUnifiedStream (a stream's shape),
// Accumulate and StreamMatchesAnswer (a stream read by the OpenAI SDK
// says what the whole answer says), ChatRequestError and
// CommonRequestErrors (what a translator refuses, and how), Translate and
// Feed (a stream cut into events by a framing, as the gateway cuts it).
//
// Only tests import it.
package providerkit
