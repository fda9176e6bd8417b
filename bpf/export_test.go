package bpf

// LayoutNames returns the names of the maps in the layout, for the
// external tests.
func LayoutNames() []string {
	var names []string
	for _, d := range layout {
		names = append(names, d.name)
	}
	return names
}
