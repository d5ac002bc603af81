package guardrails

import "fmt"

// A Kind is what a built-in detector finds.
type Kind uint8

// The built-in detectors, by what they find.
const (
	Email Kind = iota
	Phone
	CreditCard
	IBAN
	IPAddress
	USSSN
	Secret
	numKinds
)

// kindNames are the kinds' names in the configuration ("detect email …").
var kindNames = [numKinds]string{"email", "phone", "credit_card", "iban", "ip_address", "us_ssn", "secret"}

// kindPlaceholders are what masking puts in place of a match.
var kindPlaceholders = [numKinds]string{"[EMAIL]", "[PHONE]", "[CREDIT_CARD]", "[IBAN]", "[IP_ADDRESS]", "[US_SSN]", "[SECRET]"}

// String returns the kind's name in the configuration.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Placeholder is what masking puts in place of a match of k.
func (k Kind) Placeholder() string {
	if k < numKinds {
		return kindPlaceholders[k]
	}
	return "[REDACTED]"
}

// ParseKind returns the kind named name.
func ParseKind(name string) (Kind, error) {
	for k, n := range kindNames {
		if n == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown detector %q (want one of email, phone, credit_card, iban, ip_address, us_ssn, secret)", name)
}

// Kinds is every built-in detector, the default of a pii guard.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}
