package sim

// LogModels lists the log models. For the package's tests only.
func LogModels() []LogModel { return []LogModel{AppendOnly, MintOrdered} }
