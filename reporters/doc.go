// Package reporters renders a sweep's results file for people and machines:
// a terminal table (Text), a markdown report and GitHub pull-request comment
// (Markdown), charts (PNG), indented JSON (JSON) and Go benchmark format.
//
// Each reporter is a plain function that writes to an io.Writer (PNG writes
// files into a directory), takes a *results.File and never modifies it.
// Reporters sit at the end of the data flow: they read results and the metric
// definitions of package metrics, nothing upstream of those.
package reporters
