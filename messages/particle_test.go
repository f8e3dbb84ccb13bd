package messages

import "testing"

// TestParticle holds how each kind of word ends when read aloud (the
// rules in particle.go): Hangul with and without a final and with ㄹ,
// numbers as Korean numerals read them, Latin letters and words, and
// quotes and brackets looked through.
func TestParticle(t *testing.T) {
	for _, tc := range []struct {
		text                   string
		eul, eun, i, gwa, euro string
	}{
		// Hangul.
		{"판매가", "를", "는", "가", "와", "로"},
		{"상품명", "을", "은", "이", "과", "으로"},
		{"행", "을", "은", "이", "과", "으로"},
		{"서울", "을", "은", "이", "과", "로"}, // ㄹ: 로
		{"재고수량", "을", "은", "이", "과", "으로"},
		{"ㄱ", "을", "은", "이", "과", "으로"}, // 기역
		{"ㄹ", "을", "은", "이", "과", "로"},  // 리을
		{"ㅏ", "를", "는", "가", "와", "로"},
		// Numbers: the last digit's name, or the place of trailing zeros.
		{"45413", "을", "은", "이", "과", "으로"},         // 삼
		{"0", "을", "은", "이", "과", "으로"},             // 영
		{"1", "을", "은", "이", "과", "로"},              // 일
		{"2", "를", "는", "가", "와", "로"},              // 이
		{"3", "을", "은", "이", "과", "으로"},             // 삼
		{"4", "를", "는", "가", "와", "로"},              // 사
		{"5", "를", "는", "가", "와", "로"},              // 오
		{"6", "을", "은", "이", "과", "으로"},             // 육
		{"7", "을", "은", "이", "과", "로"},              // 칠
		{"8", "을", "은", "이", "과", "로"},              // 팔
		{"9", "를", "는", "가", "와", "로"},              // 구
		{"10", "을", "은", "이", "과", "으로"},            // 십
		{"20", "을", "은", "이", "과", "으로"},            // 이십
		{"100", "을", "은", "이", "과", "으로"},           // 백
		{"1000", "을", "은", "이", "과", "으로"},          // 천
		{"1,000", "을", "은", "이", "과", "으로"},         // 천: commas are not read
		{"10000", "을", "은", "이", "과", "으로"},         // 만
		{"120000", "을", "은", "이", "과", "으로"},        // 십이만
		{"100000000", "을", "은", "이", "과", "으로"},     // 억
		{"1000000000000", "를", "는", "가", "와", "로"},  // 조
		{"1,000,000,000", "을", "은", "이", "과", "으로"}, // 십억
		{"12", "를", "는", "가", "와", "로"},             // 십이
		{"21", "을", "은", "이", "과", "로"},             // 이십일
		{"000", "을", "은", "이", "과", "으로"},           // 영
		{"12.5", "를", "는", "가", "와", "로"},           // 십이점오
		{"1.10", "을", "은", "이", "과", "으로"},          // 일점일영: read digit by digit
		{"2024-05-01", "을", "은", "이", "과", "로"},     // 일
		{"P-000123", "을", "은", "이", "과", "으로"},      // 삼
		{"%20", "을", "은", "이", "과", "으로"},           // 이십
		// Latin: capitals and single letters by the letters' names.
		{"SKU", "를", "는", "가", "와", "로"},  // 유
		{"URL", "을", "은", "이", "과", "로"},  // 엘
		{"CSV", "를", "는", "가", "와", "로"},  // 브이
		{"D", "를", "는", "가", "와", "로"},    // 디
		{"M", "을", "은", "이", "과", "으로"},   // 엠
		{"N", "을", "은", "이", "과", "으로"},   // 엔
		{"R", "을", "은", "이", "과", "로"},    // 알
		{"l", "을", "은", "이", "과", "로"},    // 엘
		{"TRUE", "를", "는", "가", "와", "로"}, // 이
		// Latin words as loanwords.
		{"Excel", "을", "은", "이", "과", "로"},
		{"image_url", "을", "은", "이", "과", "로"},
		{"price", "를", "는", "가", "와", "로"},
		{"name", "을", "은", "이", "과", "으로"},
		{"stock", "을", "은", "이", "과", "으로"},
		{"description", "을", "은", "이", "과", "으로"},
		{"brand", "를", "는", "가", "와", "로"},
		{"seller_sku", "를", "는", "가", "와", "로"},
		{"shipping", "을", "은", "이", "과", "으로"},
		{"web", "을", "은", "이", "과", "으로"},
		{"cat", "을", "은", "이", "과", "으로"},
		{"boat", "를", "는", "가", "와", "로"},
		{"test", "를", "는", "가", "와", "로"},
		{"user", "를", "는", "가", "와", "로"},
		{"file", "을", "은", "이", "과", "로"},
		{"music", "을", "은", "이", "과", "으로"},
		{"http://", "를", "는", "가", "와", "로"}, // the slashes and colon are not read
		// Quotes are looked through; an aside in brackets is left out.
		{`"12,000원"`, "을", "은", "이", "과", "으로"},
		{`"A-1"`, "을", "은", "이", "과", "로"},
		{`"abc…"…`, "를", "는", "가", "와", "로"},
		{"‘가방’", "을", "은", "이", "과", "으로"},
		{"「판매가」", "를", "는", "가", "와", "로"},
		{"상품명 (name)", "을", "은", "이", "과", "으로"},
		{"판매가* (price)", "를", "는", "가", "와", "로"},
		{"대표이미지URL (image_url)", "을", "은", "이", "과", "로"},
		{"서울(Seoul)", "을", "은", "이", "과", "로"},
		{"(price)", "를", "는", "가", "와", "로"},
		{"[45413]", "을", "은", "이", "과", "으로"},
		{"판매가 ", "를", "는", "가", "와", "로"},
		{"판매가*", "를", "는", "가", "와", "로"},
		// Anything else reads as ending in a vowel.
		{"", "를", "는", "가", "와", "로"},
		{"商品", "를", "는", "가", "와", "로"},
		{"😀", "를", "는", "가", "와", "로"},
		{"50%", "를", "는", "가", "와", "로"}, // 퍼센트
	} {
		for _, p := range []struct{ asked, want string }{
			{"을", tc.eul}, {"를", tc.eul}, {"은", tc.eun}, {"는", tc.eun}, {"이", tc.i}, {"가", tc.i},
			{"과", tc.gwa}, {"와", tc.gwa}, {"으로", tc.euro}, {"로", tc.euro},
		} {
			if got := Particle(tc.text, p.asked); got != p.want {
				t.Errorf("Particle(%q, %q) = %q, want %q", tc.text, p.asked, got, p.want)
			}
		}
	}
	if got := Particle("판매가", "에"); got != "에" {
		t.Errorf("a word that is not a particle is kept: %q", got)
	}
	if got := WithParticle("45413", "로"); got != "45413으로" {
		t.Errorf("WithParticle = %q", got)
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "rows"}, {1, "row"}, {2, "rows"}, {21, "rows"}, {-1, "rows"}} {
		if got := Plural(tc.n, "row", "rows"); got != tc.want {
			t.Errorf("Plural(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestFill: a particle mark follows what is written before it, a plural
// mark its parameter's number (commas grouping digits).
func TestFill(t *testing.T) {
	for _, tc := range []struct {
		s      string
		params map[string]string
		want   string
	}{
		{"{value}{으로} 저장", map[string]string{"value": "45413"}, "45413으로 저장"},
		{"{value}{로} 저장", map[string]string{"value": "2024-05-01"}, "2024-05-01로 저장"},
		{"{field}{은} 비어", map[string]string{"field": "판매가"}, "판매가는 비어"},
		{"{field}{는} 비어", map[string]string{"field": "상품명"}, "상품명은 비어"},
		{"{value}{이} 있습니다", map[string]string{"value": `"TRUE"`}, `"TRUE"가 있습니다`},
		{"http://{로}", nil, "http://로"},
		{"{count} more {count|problem|problems}", map[string]string{"count": "1"}, "1 more problem"},
		{"{count} more {count|problem|problems}", map[string]string{"count": "2"}, "2 more problems"},
		{"{count} {count|row is|rows are}", map[string]string{"count": "1,001"}, "1,001 rows are"},
		{"{count} {count|row is|rows are}", map[string]string{"count": "0"}, "0 rows are"},
		{"{missing}{을}", nil, "를"},
		{"open {", nil, "open {"},
	} {
		if got := fill(tc.s, tc.params); got != tc.want {
			t.Errorf("fill(%q, %v) = %q, want %q", tc.s, tc.params, got, tc.want)
		}
	}
	if got := Placeholders("{count} {count|a|b} {value}{을} {으로}"); len(got) != 2 || got[0] != "count" || got[1] != "value" {
		t.Errorf("Placeholders = %v, want [count value]", got)
	}
}

func TestAt(t *testing.T) {
	for _, tc := range []struct {
		lang, cell string
		row        int
		field      string
		want       string
	}{
		{KO, "D3", 3, "판매가", "D3 판매가: 문제"},
		{EN, "D3", 3, "price", "D3 price: 문제"},
		{KO, "D3", 3, "", "D3: 문제"},
		{KO, "", 5, "", "5행: 문제"},
		{EN, "", 5, "", "row 5: 문제"},
		{KO, "", 5, "판매가", "5행 판매가: 문제"},
		{KO, "", 0, "판매가", "판매가: 문제"},
		{KO, "", 0, "", "문제"},
	} {
		if got := At(tc.lang, tc.cell, tc.row, tc.field, "문제"); got != tc.want {
			t.Errorf("At(%s, %q, %d, %q) = %q, want %q", tc.lang, tc.cell, tc.row, tc.field, got, tc.want)
		}
	}
}
