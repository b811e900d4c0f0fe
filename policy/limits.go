package policy

// Validate reports whether l is a valid set of limits, as the options that
// set them check: MaxInFlight and MaxConcurrency must be >= 1 (Unlimited for
// none), QueueThreshold >= 0 (0: a task that cannot start at once is
// refused), Share >= 1. For the first invalid field it returns an
// *OptionError, matching ErrInvalidOption, whose Option names the field
// (e.g. "GroupLimits.MaxConcurrency") and whose Value is the value given.
func (l GroupLimits) Validate() error {
	switch {
	case l.MaxInFlight < 1:
		return &OptionError{Option: "GroupLimits.MaxInFlight", Value: l.MaxInFlight, Reason: limitReason}
	case l.MaxConcurrency < 1:
		return &OptionError{Option: "GroupLimits.MaxConcurrency", Value: l.MaxConcurrency, Reason: limitReason}
	case l.QueueThreshold < 0:
		return &OptionError{Option: "GroupLimits.QueueThreshold", Value: l.QueueThreshold, Reason: thresholdReason}
	case l.Share < 1:
		return &OptionError{Option: "GroupLimits.Share", Value: l.Share, Reason: shareReason}
	}
	return nil
}
