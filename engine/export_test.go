package engine

// MessageCarriesStepInput reports whether an encoded queue message carries
// the step input (resilient dispatch). Tests only.
func MessageCarriesStepInput(body []byte) bool {
	m, err := decodeMessage(body)
	return err == nil && m.stepInput
}
