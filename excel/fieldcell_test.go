package excel

import "testing"

func TestFieldCell(t *testing.T) {
	s := &Sheet{Header: []string{"메모", "상품명", "판매자상품코드*", "price"}}
	cases := []struct {
		field string
		row   int
		want  string
	}{
		{FieldSellerSKU, 17, "C17"},
		{FieldName, 2, "B2"},
		{FieldPrice, 500, "D500"},
		{FieldStock, 3, ""},
	}
	for _, c := range cases {
		if got := s.FieldCell(c.field, c.row); got != c.want {
			t.Errorf("FieldCell(%s, %d) = %q, want %q", c.field, c.row, got, c.want)
		}
	}
}
