package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// HistoryPath is where the API serves the journal of frontend changes
// (tables.History), as JSON (HistoryAnswer). Parameters:
//
//	frontend=ADDR   one frontend's records (10.96.0.1:80/TCP)
//	service=NS/NAME one service's (CLUSTER/NS/NAME for a remote one)
//	since=DURATION  those of the last DURATION
//	after=SEQ       those after SEQ (a watcher's last)
//	wait=DURATION   with after: wait up to DURATION (at most half the
//	                request timeout) for one, then answer (maybe none)
//	limit=N         the newest N (default and most: 10,000)
const HistoryPath = "/history"

// MaxHistoryRecords is the most records one answer holds.
const MaxHistoryRecords = 10000

// HistoryAnswer is the JSON document at HistoryPath.
type HistoryAnswer struct {
	Records []tables.HistoryRecord `json:"records"`
	Stats   tables.HistoryStats    `json:"stats"`
}

// historyHandler serves h at HistoryPath within l's request timeout.
func (l Limits) historyHandler(h *tables.History) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, wait, err := historyQuery(r, l.RequestTimeout/2)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		recs, watch := h.Records(q)
		if len(recs) == 0 && wait > 0 {
			timer := time.NewTimer(wait)
			defer timer.Stop()
			for len(recs) == 0 {
				select {
				case <-watch:
				case <-timer.C:
					wait = 0
				case <-r.Context().Done():
					return
				}
				recs, watch = h.Records(q)
				if wait == 0 {
					break
				}
			}
		}
		if recs == nil {
			recs = []tables.HistoryRecord{}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(HistoryAnswer{Records: recs, Stats: h.Stats()})
	}
}

// historyQuery reads the request's parameters.
func historyQuery(r *http.Request, maxWait time.Duration) (q tables.HistoryQuery, wait time.Duration, err error) {
	v := r.URL.Query()
	q.Limit = MaxHistoryRecords
	if s := v.Get("frontend"); s != "" {
		if q.Frontend, err = lb.ParseL3n4Addr(s); err != nil {
			return q, 0, fmt.Errorf("frontend %q: %w", s, err)
		}
	}
	if s := v.Get("service"); s != "" {
		if q.Service, err = lb.ParseServiceName(s); err != nil {
			return q, 0, fmt.Errorf("service %q: %w", s, err)
		}
	}
	if s := v.Get("since"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return q, 0, fmt.Errorf("since %q: want a duration such as 10m", s)
		}
		q.Since = time.Now().Add(-d)
	}
	if s := v.Get("after"); s != "" {
		if q.After, err = strconv.ParseUint(s, 10, 64); err != nil {
			return q, 0, fmt.Errorf("after %q: want a sequence number", s)
		}
	}
	if s := v.Get("wait"); s != "" {
		if wait, err = time.ParseDuration(s); err != nil || wait < 0 {
			return q, 0, fmt.Errorf("wait %q: want a duration such as 20s", s)
		}
		wait = min(wait, maxWait)
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return q, 0, fmt.Errorf("limit %q: want a number above 0", s)
		}
		q.Limit = min(n, MaxHistoryRecords)
	}
	return q, wait, nil
}
