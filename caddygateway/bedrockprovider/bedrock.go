// Package bedrockprovider is the Caddy module of the bedrock provider type,
// modelgate.providers.bedrock: Amazon Bedrock's Converse API for chat, its
// InvokeModel API for the Titan and Cohere embeddings models and for
// Anthropic's Messages API to Claude, behind the
// translators of package providers/bedrock, with every request signed with
// AWS SigV4 (or carrying a Bedrock API key).
package bedrockprovider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/bedrock"
)

func init() {
	caddy.RegisterModule(Provider{})
}

// Provider is Amazon Bedrock in one AWS region. Chat requests are
// translated to Converse (ConverseStream for streams), embeddings requests
// to InvokeModel for Titan Text Embeddings and Cohere Embed. The model is a
// Bedrock model id ("anthropic.claude-sonnet-4-5-20250929-v1:0"), an
// inference profile id ("us.anthropic.…", "global.…") or an ARN.
//
// Requests are signed with AWS SigV4 (service "bedrock") by the transport,
// over the final request: its Host, path, headers and body. Credentials
// are the static keys given here, or else the standard AWS chain
// (environment, shared config and credentials files, SSO, web identity,
// container and instance roles), optionally exchanged for a role's through
// STS (assume_role); the SDK's credentials cache keeps them and refreshes
// them before they expire. A Bedrock API key (api_key, or
// AWS_BEARER_TOKEN_BEDROCK for the chain) is sent as a bearer token
// instead.
type Provider struct {
	caddygateway.ProviderBase

	// Batch is where batches send this provider's lines: "native", to
	// its own batch API at its batch price, or "gateway", as live
	// requests. Default: native.
	Batch string `json:"batch,omitempty"`

	// BatchBucket is where Bedrock batch inference reads its input and
	// writes its output, s3://bucket[/prefix] (in the provider's region),
	// and BatchRole the service role Bedrock assumes to do so
	// (arn:aws:iam::<account>:role/<name>). With both, the batch lines of
	// Claude models go to Bedrock's batch inference; without them, all
	// of this provider's batch lines run in the gateway. Placeholders are
	// resolved.
	BatchBucket string `json:"batch_bucket,omitempty"`
	BatchRole   string `json:"batch_role,omitempty"`

	// BatchControlURL is where batch inference's jobs are created and
	// polled, Bedrock's control plane: a VPC or FIPS endpoint. Default:
	// https://bedrock.{region}.amazonaws.com. BatchStorageURL is the URL
	// under which /{key} names an object of batch_bucket (virtual-hosted
	// or path-style). Default: https://{bucket}.s3.{region}.amazonaws.com,
	// or https://s3.{region}.amazonaws.com/{bucket} for a bucket whose
	// name has a dot. Both are signed for the provider's region.
	// Placeholders are resolved.
	BatchControlURL string `json:"batch_control_url,omitempty"`
	BatchStorageURL string `json:"batch_storage_url,omitempty"`

	// Region is the AWS region, such as us-east-1; placeholders are
	// resolved. It names the default base URL,
	// https://bedrock-runtime.{region}.amazonaws.com, and the signatures'
	// scope. Default: the AWS chain's (AWS_REGION, AWS_DEFAULT_REGION, the
	// profile's region); one of them is required.
	Region string `json:"region,omitempty"`

	// AccessKeyID, SecretAccessKey and SessionToken are static AWS
	// credentials, usually placeholders such as {env.BEDROCK_KEY_ID}.
	// Without them the AWS chain provides credentials.
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	SessionToken    string `json:"session_token,omitempty"`

	// Profile is the shared config profile the AWS chain reads. Default:
	// AWS_PROFILE, else "default".
	Profile string `json:"profile,omitempty"`

	// AssumeRole, when set, exchanges the credentials (static or from the
	// chain) for a role's through STS.
	AssumeRole *AssumeRole `json:"assume_role,omitempty"`

	// StructuredOutput is how response_format json_schema reaches the
	// model: "native" (Converse's outputConfig.textFormat; the default) or
	// "tool" (a forced tool, for models without native structured output).
	StructuredOutput string `json:"structured_output,omitempty"`

	// BaseModels names the model behind a model id that does not say which
	// it is (an application inference profile or provisioned throughput
	// ARN): its family decides the reasoning configuration and, for
	// embeddings, the body. Keys are the model as routed to this provider.
	BaseModels map[string]string `json:"base_models,omitempty"`

	chat       bedrock.Chat
	embeddings bedrock.Embeddings
	messages   bedrock.Messages

	// batches is the batch inference API without its Sends, and
	// control and storage the services it calls; set when batch_bucket
	// and batch_role are. controlSend and storageSend carry its requests
	// to them, provisioned when the batch mode is native.
	batches                  *bedrock.Batches
	control, storage         caddygateway.ProviderType
	controlSend, storageSend providers.Send
}

// AssumeRole is an IAM role the gateway assumes through STS (AssumeRole),
// with the credentials it has, to call Bedrock as that role.
type AssumeRole struct {
	// RoleARN is the role, arn:aws:iam::<account>:role/<name>.
	RoleARN string `json:"role_arn"`

	// ExternalID is the external id the role's trust policy asks for.
	ExternalID string `json:"external_id,omitempty"`

	// SessionName names the role session (it appears in CloudTrail).
	// Default: modelgate.
	SessionName string `json:"session_name,omitempty"`

	// Duration is how long the role's credentials last. Default: STS's,
	// 15 minutes; they are renewed 5 minutes before they expire.
	Duration caddy.Duration `json:"duration,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "modelgate.providers.bedrock",
		New: func() caddy.Module { return new(Provider) },
	}
}

// providerType is the type's description for the Caddyfile: its base URL
// and authentication depend on the configuration (see Provision).
var providerType = caddygateway.ProviderType{Name: "bedrock"}

// Provision sets up the translators, the credentials and the reverse proxy.
func (p *Provider) Provision(ctx caddy.Context) error {
	switch p.StructuredOutput {
	case "", bedrock.StructuredNative, bedrock.StructuredTool:
	default:
		return fmt.Errorf("bedrock: structured_output must be %s or %s, not %q", bedrock.StructuredNative, bedrock.StructuredTool, p.StructuredOutput)
	}
	p.chat = bedrock.Chat{StructuredOutput: p.StructuredOutput, BaseModels: p.BaseModels}
	p.embeddings = bedrock.Embeddings{BaseModels: p.BaseModels}
	p.messages = bedrock.Messages{BaseModels: p.BaseModels}
	auth, region, err := p.authenticator(ctx)
	if err != nil {
		return fmt.Errorf("bedrock: %w", err)
	}
	t := providerType
	t.BaseURL, t.Auth = endpoint(region), auth
	r := p.resolve()
	t.Secrets = []string{r.secret, r.token}
	if err := p.provisionBatches(auth, region, t.Secrets); err != nil {
		return fmt.Errorf("bedrock: %w", err)
	}
	if err := p.ProvisionBase(ctx, t); err != nil {
		return err
	}
	return p.provisionServices(ctx)
}

// provisionServices loads the upstreams of the control plane and the
// bucket when batches send the provider's lines to batch inference.
func (p *Provider) provisionServices(ctx caddy.Context) error {
	if p.batches == nil || p.BatchMode() != batch.ModeNative {
		return nil
	}
	var err error
	if p.controlSend, err = caddygateway.ProvisionService(ctx, p.control); err != nil {
		return fmt.Errorf("bedrock: batch control plane: %w", err)
	}
	if p.storageSend, err = caddygateway.ProvisionService(ctx, p.storage); err != nil {
		return fmt.Errorf("bedrock: batch bucket: %w", err)
	}
	return nil
}

// provisionBatches sets up batch inference when batch_bucket and
// batch_role are given: its API, and the control plane and bucket it
// calls, signed with the provider's credentials for services bedrock and
// s3.
func (p *Provider) provisionBatches(auth caddygateway.Authenticator, region string, secrets []string) error {
	repl := caddy.NewReplacer()
	uri, role := repl.ReplaceKnown(p.BatchBucket, ""), repl.ReplaceKnown(p.BatchRole, "")
	switch {
	case p.BatchBucket == "" && p.BatchRole == "":
		if p.BatchControlURL != "" || p.BatchStorageURL != "" {
			return errors.New("batch_control_url and batch_storage_url need batch_bucket")
		}
		if p.Batch == batch.ModeNative {
			return errors.New("batch native needs batch_bucket and batch_role")
		}
		return nil
	case uri == "" || role == "":
		return errors.New("batch_bucket and batch_role go together (is an environment variable unset?)")
	case !bedrock.ValidRoleARN(role):
		return fmt.Errorf("batch_role %q is not an IAM role's ARN (arn:aws:iam::<account>:role/<name>)", role)
	}
	bucket, prefix, err := bedrock.ParseS3URI(uri)
	if err != nil {
		return fmt.Errorf("batch_bucket: %w", err)
	}
	sig, ok := auth.(*sigV4)
	if !ok {
		return errors.New("batch_bucket needs AWS credentials: S3 takes no Bedrock API key")
	}
	control, err := serviceURL("batch_control_url", p.BatchControlURL, controlEndpoint(region))
	if err != nil {
		return err
	}
	storage, err := serviceURL("batch_storage_url", p.BatchStorageURL, bucketEndpoint(bucket, region))
	if err != nil {
		return err
	}
	p.batches = &bedrock.Batches{Bucket: bucket, Prefix: prefix, RoleARN: role, Messages: p.messages}
	// The services of batch inference besides the runtime, each with its
	// base URL and signer: the control plane, signed for service
	// bedrock, and the bucket, signed for service s3 with an unsigned
	// payload, so that uploads stream.
	p.control = caddygateway.ProviderType{Name: "bedrock", BaseURL: control, Auth: sig, Secrets: secrets}
	p.storage = caddygateway.ProviderType{Name: "bedrock", BaseURL: storage, Auth: sig.forS3(), Secrets: secrets}
	return nil
}

// serviceURL is the base URL of a batch service: option's value, its
// placeholders resolved and checked, else def.
func serviceURL(option, value, def string) (string, error) {
	if value == "" {
		return def, nil
	}
	raw := caddy.NewReplacer().ReplaceKnown(value, "")
	if raw == "" {
		return "", fmt.Errorf("%s %s is empty (is the environment variable set?)", option, value)
	}
	if _, err := caddygateway.ParseBaseURL(option, raw); err != nil {
		return "", err
	}
	return raw, nil
}

// NativeBatches is Bedrock batch inference for the batch engine
// (caddygateway.NativeBatcher), over the upstreams of its control plane
// and bucket that Provision loaded; send, the runtime's, carries none of
// its requests. Nil when the provider has no batch_bucket or its batch
// mode is gateway.
func (p *Provider) NativeBatches(send providers.Send) batch.NativeAPI {
	if p.batches == nil || p.controlSend == nil {
		return nil
	}
	b := *p.batches
	b.Control, b.Storage = p.controlSend, p.storageSend
	return b
}

// UnmarshalCaddyfile reads a bedrock provider block. Syntax:
//
//	provider <name> bedrock {
//	    region            <region>
//	    access_key_id     <id>
//	    secret_access_key <secret>
//	    session_token     <token>
//	    profile           <shared config profile>
//	    assume_role       <role arn> {
//	        external_id  <id>
//	        session_name <name>
//	        duration     <duration>
//	    }
//	    api_key           <Bedrock API key>
//	    structured_output native|tool
//	    batch             native|gateway
//	    batch_bucket      s3://<bucket>[/<prefix>]
//	    batch_role        <service role arn>
//	    batch_control_url <url>   # default https://bedrock.{region}.amazonaws.com
//	    batch_storage_url <url>   # default the bucket's S3 endpoint
//	    base_model        <model> <base model id>   # repeatable
//	    base_url          <url>
//	    models            <model>...
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (p *Provider) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := p.UnmarshalBlock(d, providerType, func(d *caddyfile.Dispenser) (bool, error) {
		switch opt := d.Val(); opt {
		case "region", "access_key_id", "secret_access_key", "session_token", "profile":
			dst := map[string]*string{
				"region": &p.Region, "access_key_id": &p.AccessKeyID, "secret_access_key": &p.SecretAccessKey,
				"session_token": &p.SessionToken, "profile": &p.Profile,
			}[opt]
			if !d.AllArgs(dst) {
				return true, d.ArgErr()
			}
		case "batch":
			return true, caddygateway.ParseBatchMode(d, &p.Batch)
		case "batch_bucket":
			if !d.AllArgs(&p.BatchBucket) {
				return true, d.ArgErr()
			}
			if !strings.Contains(p.BatchBucket, "{") {
				if _, _, err := bedrock.ParseS3URI(p.BatchBucket); err != nil {
					return true, d.Errf("batch_bucket: %v", err)
				}
			}
		case "batch_role":
			if !d.AllArgs(&p.BatchRole) {
				return true, d.ArgErr()
			}
			if !strings.Contains(p.BatchRole, "{") && !bedrock.ValidRoleARN(p.BatchRole) {
				return true, d.Errf("batch_role %q is not an IAM role's ARN (arn:aws:iam::<account>:role/<name>)", p.BatchRole)
			}
		case "batch_control_url", "batch_storage_url":
			dst := map[string]*string{"batch_control_url": &p.BatchControlURL, "batch_storage_url": &p.BatchStorageURL}[opt]
			if !d.AllArgs(dst) {
				return true, d.ArgErr()
			}
			if !strings.Contains(*dst, "{") {
				if _, err := caddygateway.ParseBaseURL(opt, *dst); err != nil {
					return true, d.Err(err.Error())
				}
			}
		case "structured_output":
			if !d.AllArgs(&p.StructuredOutput) {
				return true, d.ArgErr()
			}
			if p.StructuredOutput != bedrock.StructuredNative && p.StructuredOutput != bedrock.StructuredTool {
				return true, d.Errf("structured_output must be %s or %s, not %q", bedrock.StructuredNative, bedrock.StructuredTool, p.StructuredOutput)
			}
		case "base_model":
			var model, base string
			if !d.AllArgs(&model, &base) {
				return true, d.ArgErr()
			}
			if _, dup := p.BaseModels[model]; dup {
				return true, d.Errf("base_model for %q given twice", model)
			}
			if p.BaseModels == nil {
				p.BaseModels = map[string]string{}
			}
			p.BaseModels[model] = base
		case "assume_role":
			p.AssumeRole = new(AssumeRole)
			if !d.NextArg() {
				return true, d.ArgErr()
			}
			p.AssumeRole.RoleARN = d.Val()
			if d.NextArg() {
				return true, d.ArgErr()
			}
			return true, p.AssumeRole.unmarshal(d)
		default:
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	switch {
	case (p.AccessKeyID == "") != (p.SecretAccessKey == ""):
		return d.Err("provider type bedrock needs access_key_id and secret_access_key together")
	case p.SessionToken != "" && p.AccessKeyID == "":
		return d.Err("provider type bedrock takes session_token only with access_key_id and secret_access_key")
	case p.APIKey != "" && (p.AccessKeyID != "" || p.Profile != "" || p.AssumeRole != nil):
		return d.Err("provider type bedrock takes api_key (a Bedrock API key) or AWS credentials (access keys, profile, assume_role), not both")
	case (p.BatchBucket == "") != (p.BatchRole == ""):
		return d.Err("provider type bedrock needs batch_bucket and batch_role together")
	case p.APIKey != "" && p.BatchBucket != "":
		return d.Err("provider type bedrock needs AWS credentials for batch_bucket: S3 takes no Bedrock API key")
	case p.BatchBucket == "" && (p.BatchControlURL != "" || p.BatchStorageURL != ""):
		return d.Err("provider type bedrock takes batch_control_url and batch_storage_url only with batch_bucket")
	case p.BatchBucket == "" && p.Batch == batch.ModeNative:
		return d.Err("provider type bedrock needs batch_bucket and batch_role for batch native")
	}
	return nil
}

func (a *AssumeRole) unmarshal(d *caddyfile.Dispenser) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "external_id":
			if !d.AllArgs(&a.ExternalID) {
				return d.ArgErr()
			}
		case "session_name":
			if !d.AllArgs(&a.SessionName) {
				return d.ArgErr()
			}
		case "duration":
			var s string
			if !d.AllArgs(&s) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(s)
			if err != nil || dur < 15*time.Minute || dur > 12*time.Hour {
				return d.Errf("assume_role duration must be from 15m to 12h, not %q", s)
			}
			a.Duration = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized assume_role option %q", opt)
		}
	}
	return nil
}

// Base returns the provider's common configuration.
func (p *Provider) Base() *caddygateway.ProviderBase { return &p.ProviderBase }

// Endpoints returns the translators: Bedrock serves chat (Converse),
// embeddings (InvokeModel) and, for Claude, the Messages API natively
// (InvokeModel with Anthropic's body; other models' Messages requests go
// through Converse).
func (p *Provider) Endpoints() caddygateway.Endpoints {
	return caddygateway.Endpoints{Chat: p.chat, Embeddings: p.embeddings, Messages: p.messages}
}

// Interface guards
var (
	_ caddy.Provisioner          = (*Provider)(nil)
	_ caddyfile.Unmarshaler      = (*Provider)(nil)
	_ caddygateway.Provider      = (*Provider)(nil)
	_ caddygateway.NativeBatcher = (*Provider)(nil)
	_ caddygateway.Authenticator = (*sigV4)(nil)
)

// BatchMode is where batches send the provider's lines: with
// batch_bucket, its Batch option, else the type's default (native: its
// API has batches); without, the gateway, since batch inference has
// nowhere to read its records from.
func (p *Provider) BatchMode() string {
	if p.BatchBucket == "" {
		return batch.ModeGateway
	}
	return caddygateway.BatchMode(p.Batch, providerType.Name)
}
