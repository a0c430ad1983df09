package profile

// LoadHDR reads the recorded distribution in the file at path (see
// ParseHDR). For the package's tests only: profiles load their files
// through loadHDR.
func LoadHDR(path string, unit Unit) (*Empirical, error) {
	return loadHDR(nil, path, unit)
}
