package results

// For the package's tests only: the CLI and the reports use none of these.

// Path returns the journal's file path.
func (j *Journal) Path() string { return j.path }
