package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/circuit/circuittest"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// GET /v1/uploads/{id} tells the seller the marketplace is not answering
// while the consumers' circuit is open, and counts the rows as waiting.
func TestHTTPStatusDuringAnOutage(t *testing.T) {
	e := newEnv(t, nil, upload.WriterOptions{})
	b, err := circuit.New(testredis.Start(t).Client(), circuittest.Settings())
	if err != nil {
		t.Fatal(err)
	}
	e.up.Marketplace = b
	reg := prometheus.NewRegistry()
	s := &Server{Uploader: e.up, Auth: Auth{Secret: secret}, MaxFileSize: 200 << 10, Metrics: NewMetrics(reg)}
	h := &httpEnv{env: e, srv: httptest.NewServer(s.Handler())}
	t.Cleanup(h.srv.Close)
	ct, body := multipartBody(t, "file", xlsx(t, "outage", validRows(3)...), nil)
	resp, raw := h.do(t, "POST", "/v1/uploads", token(t, "seller-a"), ct, body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, raw)
	}
	var up UploadResponse
	json.Unmarshal(raw, &up)
	get := func() upload.Progress {
		t.Helper()
		resp, raw := h.do(t, "GET", "/v1/uploads/"+up.UploadID, token(t, "seller-a"), "", nil)
		var v upload.Progress
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &v) != nil || v.ID != up.UploadID {
			t.Fatalf("GET the upload: %d %s", resp.StatusCode, raw)
		}
		return v
	}
	if v := get(); v.Marketplace != upload.MarketplaceAnswering || v.Notice != "" || v.Waiting != 3 {
		t.Errorf("before the outage: marketplace %q, notice %q, %d waiting; want answering, none, 3", v.Marketplace, v.Notice, v.Waiting)
	}
	circuittest.Trip(t, b)
	if v := get(); v.Marketplace != upload.MarketplaceNotAnswering || v.Notice != upload.NotAnswering || v.Failed != 0 || v.Waiting != 3 {
		t.Errorf("during the outage: marketplace %q, notice %q, %d failed, %d waiting; want not_answering, %q, 0, 3",
			v.Marketplace, v.Notice, v.Failed, v.Waiting, upload.NotAnswering)
	}
}
