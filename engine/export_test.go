package engine

// MessageCarriesStepInput reports whether an encoded queue message carries
// the step input (resilient dispatch). Tests only.
func MessageCarriesStepInput(body []byte) bool {
	m, err := decodeMessage(body)
	return err == nil && m.stepInput
}

// Stats are counts of the engine's recovery paths since it was created.
type Stats struct {
	// CreatesSwallowed: parallel-dispatch step_created writes that failed
	// transiently and were left for the consumer to re-ensure.
	CreatesSwallowed int64
	// Reensures: step_created writes a consumer made from a message.
	Reensures int64
	// InbandRecoveries: claims retried in the same delivery after a re-ensure.
	InbandRecoveries int64
	// Handoffs: continuations handed to the queue after an inline replay failed.
	Handoffs int64
	// Republished: step messages a redelivered activation published again
	// for steps an earlier activation created but never finished.
	Republished int64
}

// Stats returns the engine's recovery counters.
func (e *Engine) Stats() Stats {
	return Stats{e.stats.createsSwallowed.Load(), e.stats.reensures.Load(),
		e.stats.inbandRecoveries.Load(), e.stats.handoffs.Load(), e.stats.republished.Load()}
}
