package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/modelgate/modelgate/providers/providertest"
)

// The fake's Bedrock credentials: the bedrock provider of providers.Caddyfile
// has them in its config, bedrock_env gets them from the AWS environment
// variables, bedrock_apikey has the API key.
const (
	bedrockKeyID  = "AKIDINTEGRATION00001"
	bedrockSecret = "integration/secret+key/for/bedrock/0001"
	bedrockToken  = "IQoJb3JpZ2luX2VjEIntegrationSessionToken=="
	bedrockAPIKey = "ABSKQmVkcm9ja0FQSUtleS1pbnRlZ3JhdGlvbg=="
)

// setBedrockEnv gives the bedrock providers their credentials: the
// placeholders of the bedrock block, and the AWS chain's environment for
// bedrock_env, with nothing else of the machine's AWS setup in reach.
func setBedrockEnv(t *testing.T) {
	t.Helper()
	t.Setenv("MG_BEDROCK_KEY_ID", bedrockKeyID)
	t.Setenv("MG_BEDROCK_SECRET", bedrockSecret)
	t.Setenv("MG_BEDROCK_TOKEN", bedrockToken)
	t.Setenv("MG_BEDROCK_API_KEY", bedrockAPIKey)
	t.Setenv("AWS_ACCESS_KEY_ID", bedrockKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", bedrockSecret)
	t.Setenv("AWS_SESSION_TOKEN", bedrockToken)
	home := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "credentials"))
	for _, k := range []string{"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK", "AWS_ROLE_ARN",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// TestIntegrationBedrockSignatures sends chat, a stream and embeddings
// through the three bedrock providers and checks what reached the fake:
// every request signed with SigV4 in its provider's region (and the session
// token), or carrying the API key; and, replayed as it arrived, a signed
// request passes the fake's verification while one with a byte of the body,
// the Host, or the path's escaping changed does not, so the signature
// covered the final request.
func TestIntegrationBedrockSignatures(t *testing.T) {
	fake, _ := startProviders(t)
	c := sdk(aliceKey)
	ctx := context.Background()
	host := strings.TrimPrefix(fake.URL, "http://")

	for _, tc := range []struct {
		provider, region string
		call             func(provider string) error
		path             string // the escaped path the fake must have got, ':' as %3A
	}{
		{"bedrock", "us-east-1", func(p string) error {
			_, err := c.Chat.Completions.New(ctx, userChat(p+"/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "signed hello"))
			return err
		}, "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"},
		{"bedrock", "us-east-1", func(p string) error {
			s := c.Chat.Completions.NewStreaming(ctx, userChat(p+"/amazon.nova-2-lite-v1:0:256k", "signed stream"))
			for s.Next() {
			}
			return s.Err()
		}, "/model/amazon.nova-2-lite-v1%3A0%3A256k/converse-stream"},
		{"bedrock", "us-east-1", func(p string) error {
			_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: p + "/amazon.titan-embed-text-v2:0", Dimensions: openai.Int(512),
				Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("signed text")}})
			return err
		}, "/model/amazon.titan-embed-text-v2%3A0/invoke"},
		{"bedrock_env", "us-east-2", func(p string) error {
			_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: p + "/cohere.embed-v4:0",
				Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one", "two"}}})
			return err
		}, "/model/cohere.embed-v4%3A0/invoke"},
		{"bedrock_env", "us-east-2", func(p string) error {
			_, err := c.Chat.Completions.New(ctx, userChat(p+"/arn:aws:bedrock:us-east-2:123456789012:application-inference-profile/p1", "via a profile"))
			return err
		}, "/model/arn%3Aaws%3Abedrock%3Aus-east-2%3A123456789012%3Aapplication-inference-profile%2Fp1/converse"},
	} {
		t.Run(tc.provider+tc.path, func(t *testing.T) {
			before := len(fake.Requests())
			if err := tc.call(tc.provider); err != nil {
				t.Fatal(err)
			}
			sent := fake.Requests()[before:]
			if len(sent) != 1 || sent[0].Format != "bedrock" {
				t.Fatalf("the fake got %d requests", len(sent))
			}
			r := sent[0]
			authz := r.Header.Get("Authorization")
			if !strings.HasPrefix(authz, "AWS4-HMAC-SHA256 Credential="+bedrockKeyID+"/") || !strings.Contains(authz, "/"+tc.region+"/bedrock/aws4_request,") ||
				!strings.Contains(authz, "SignedHeaders=accept;accept-encoding;content-length;content-type;host;x-amz-date;x-amz-security-token,") ||
				r.Header.Get("X-Amz-Security-Token") != bedrockToken {
				t.Errorf("signed %q, token %q", authz, r.Header.Get("X-Amz-Security-Token"))
			}
			if status, body := replay(t, fake, r, tc.path, host, nil); status != 200 {
				t.Fatalf("the request replayed as it arrived: %d %s", status, body)
			}
			for name, tamper := range map[string]func(*http.Request, *[]byte){
				"body": func(_ *http.Request, b *[]byte) { (*b)[len(*b)/2] ^= 1 },
				"host": func(req *http.Request, _ *[]byte) { req.Host = "bedrock-runtime." + tc.region + ".amazonaws.com" },
				"path": func(req *http.Request, _ *[]byte) {
					req.URL.RawPath = strings.Replace(req.URL.RawPath, "%3A", ":", 1)
				},
			} {
				if status, body := replay(t, fake, r, tc.path, host, tamper); status != 403 || !strings.Contains(body, "signature") {
					t.Errorf("replayed with its %s changed: %d %s", name, status, body)
				}
			}
		})
	}

	t.Run("api key", func(t *testing.T) {
		before := len(fake.Requests())
		_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "bedrock_apikey/cohere.embed-v4:0",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("keyed")}})
		if err != nil {
			t.Fatal(err)
		}
		sent := fake.Requests()[before:]
		if len(sent) != 1 || sent[0].Header.Get("Authorization") != "Bearer "+bedrockAPIKey || sent[0].Header.Get("X-Amz-Date") != "" {
			t.Errorf("sent %v", sent)
		}
	})

	t.Run("embeddings refused as Bedrock's models refuse them", func(t *testing.T) {
		var apiErr *openai.Error
		for model, param := range map[string]string{"bedrock/amazon.titan-embed-text-v2:0": "dimensions", "bedrock/cohere.embed-english-v3": "dimensions"} {
			_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: model, Dimensions: openai.Int(64),
				Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != param {
				t.Errorf("%s with dimensions 64: %v", model, err)
			}
		}
		_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "bedrock/amazon.titan-embed-text-v2:0",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{1, 2}}})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_parameter" {
			t.Errorf("token ids: %v", err)
		}
	})
}

// replay sends a request the fake recorded again, at path (escaped) with
// Host host, after tamper (nil: none), and returns the answer.
func replay(t *testing.T, fake *providertest.Server, r providertest.Recorded, path, host string, tamper func(*http.Request, *[]byte)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fake.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.RawPath = path
	req.Host = host
	req.Header = r.Header.Clone()
	body := bytes.Clone(r.Body)
	if tamper != nil {
		tamper(req, &body)
	}
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
