package bpf

import "net/http"

// DumpHandler is a stand-in until lbctl's remote dump lands.
func DumpHandler(m *Maps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := TakeDump(m)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		d.WriteJSON(w)
	})
}
