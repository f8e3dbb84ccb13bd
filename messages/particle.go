package messages

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Korean particles take one of two forms by how the word before them ends
// when read aloud: after a final consonant (받침) 을, 은, 이, 과, 으로;
// after a vowel 를, 는, 가, 와, 로. 으로 is the one exception: after ㄹ it
// is 로 ("서울로", "1로", read 일로).
//
// How the word before ends is read from its last character that is read:
//
//   - Hangul: the syllable's own final; a lone consonant letter (ㄱ, ㄹ, …) is
//     read by its name, which ends in a consonant (기역, 리을, …).
//   - Digits: the number as Korean numerals read it, by its last place:
//     the last digit's name (0 영, 1 일, 2 이, 3 삼, 4 사, 5 오, 6 육, 7 칠,
//     8 팔, 9 구: "45413" ends in 삼, so 으로), or for trailing zeros the
//     place they end on (10 십, 100 백, 1000 천, then 만, 억, 조, 경, 해 for
//     every four more). Commas group digits and are not read; digits
//     after a decimal point are read one by one, so their last digit counts.
//     A number of only zeros is 영.
//   - Latin letters: a word in capitals or a single letter is read letter
//     by letter, and ends in the last letter's name: L 엘 and R 알 (ㄹ),
//     M 엠 and N 엔 (a final), every other letter a vowel ("SKU" 유, "URL"
//     엘). Any other word is read as the loanword it makes: it ends in a
//     final after l (ㄹ, "Excel"), m, n, ng; after k or c that follows a
//     vowel or ck ("stock" 스톡, "music" 뮤직); after p, b or t that follows a
//     single vowel ("cup" 컵, "web" 웹, "set" 셋); a final e after l is ㄹ
//     ("file" 파일) and after m or n a final ("name" 네임, "phone" 폰). Every
//     other ending is read with a vowel ("price" 프라이스, "code" 코드, "test"
//     테스트, "user" 유저).
//   - Closing quotes, and marks that are not read (. , ! ? … * ~ : ; / # and
//     spaces), are looked through: `"12,000원"` ends in 원.
//   - A closing bracket whose group follows other text holds an aside: the
//     particle goes with the word before the group, as "서울(Seoul)이" does;
//     "상품명 (name)" ends in 명. A text that is all in brackets is read
//     inside them.
//   - Anything else (other scripts, symbols, emoji) is read as ending in a
//     vowel.

// particles maps each form to its pair: after a consonant, after a vowel.
var particles = map[string][2]string{
	"을": {"을", "를"}, "를": {"을", "를"},
	"은": {"은", "는"}, "는": {"은", "는"},
	"이": {"이", "가"}, "가": {"이", "가"},
	"과": {"과", "와"}, "와": {"과", "와"},
	"으로": {"으로", "로"}, "로": {"으로", "로"},
}

// IsParticle reports whether p is one of the particles Particle chooses.
func IsParticle(p string) bool { _, ok := particles[p]; return ok }

// Particle is the form of the particle p (either form names it: "을" or
// "를", "으로" or "로") that follows text, chosen by how text ends when read
// aloud; p itself when it is not a particle Particle knows.
func Particle(text, p string) string {
	pair, ok := particles[p]
	if !ok {
		return p
	}
	final, rieul := Final(text)
	switch {
	case pair[0] == "으로" && rieul:
		return "로"
	case final:
		return pair[0]
	}
	return pair[1]
}

// WithParticle is text followed by the form of p that follows it.
func WithParticle(text, p string) string { return text + Particle(text, p) }

// Final reports whether text, read aloud, ends in a final consonant, and
// whether that consonant is ㄹ (see the rules above).
func Final(text string) (final, rieul bool) {
	s := lastRead(text)
	if s == "" {
		return false, false
	}
	c, size := utf8.DecodeLastRuneInString(s)
	switch {
	case c >= 0xAC00 && c <= 0xD7A3:
		f := (c - 0xAC00) % 28
		return f != 0, f == 8
	case c >= 0x3131 && c <= 0x314E: // a consonant letter, read by its name
		return true, c == 0x3139
	case c >= '0' && c <= '9':
		return numberFinal(s)
	case c < utf8.RuneSelf && isLatin(byte(c)):
		i := len(s) - size
		for i > 0 && isLatin(s[i-1]) {
			i--
		}
		return latinFinal(s[i:])
	}
	return false, false
}

// lastRead is text up to its last character that is read: closing quotes
// and unread marks looked through, an aside in brackets after other text
// left out.
func lastRead(s string) string {
	for s != "" {
		c, size := utf8.DecodeLastRuneInString(s)
		switch {
		case unicode.IsSpace(c) || strings.ContainsRune(unread, c):
			s = s[:len(s)-size]
		case strings.ContainsRune(closers, c):
			inner := s[:len(s)-size]
			open := opener(c)
			if open == 0 { // a quote: read what it quotes
				s = inner
				continue
			}
			i := strings.LastIndex(inner, string(open))
			if i < 0 {
				s = inner
				continue
			}
			if before := strings.TrimRightFunc(inner[:i], unicode.IsSpace); before != "" {
				s = before // an aside after a word: the word is read
			} else {
				s = inner[i+len(string(open)):]
			}
		default:
			return s
		}
	}
	return ""
}

// unread are marks not read aloud; closers end a quote or a bracket.
const (
	unread  = ".,!?…*~:;/#"
	closers = "\"'`’”」』)]}）］｝〉》】"
)

// opener is the bracket a closing bracket closes; 0 for a quote.
func opener(c rune) rune {
	switch c {
	case ')':
		return '('
	case ']':
		return '['
	case '}':
		return '{'
	case '）':
		return '（'
	case '］':
		return '［'
	case '｝':
		return '｛'
	case '〉':
		return '〈'
	case '》':
		return '《'
	case '】':
		return '【'
	}
	return 0
}

func isLatin(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// digitFinal is how each digit's Korean name ends: 영 일 이 삼 사 오 육 칠 팔 구.
var digitFinal = [10]struct{ final, rieul bool }{
	{true, false}, {true, true}, {false, false}, {true, false}, {false, false},
	{false, false}, {true, false}, {true, true}, {true, true}, {false, false},
}

// placeFinal and myriadFinal say whether the place a number's trailing
// zeros end on is read with a final: 십 백 천 within four digits (index 0
// is the digit itself), then 만 억 조 경 해 for each four more.
var (
	placeFinal  = [4]bool{false, true, true, true}
	myriadFinal = [6]bool{false, true, true, false, true, false}
)

// numberFinal reads the number s ends with (s ends in a digit).
func numberFinal(s string) (final, rieul bool) {
	end := len(s)
	i := end
	for i > 0 && (s[i-1] >= '0' && s[i-1] <= '9' || s[i-1] == ',') {
		i--
	}
	digits := strings.ReplaceAll(s[i:end], ",", "")
	if i >= 2 && s[i-1] == '.' && s[i-2] >= '0' && s[i-2] <= '9' {
		d := digitFinal[digits[len(digits)-1]-'0'] // digits after a point are read one by one
		return d.final, d.rieul
	}
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return true, false // 영
	}
	zeros := len(digits) - len(trimmed)
	myriad, place := zeros/4, zeros%4
	switch {
	case myriad > 0 && myriad < len(myriadFinal):
		return myriadFinal[myriad], false
	case myriad == 0 && place > 0:
		return placeFinal[place], false
	}
	d := digitFinal[trimmed[len(trimmed)-1]-'0']
	return d.final, d.rieul
}

// latinFinal reads a word of Latin letters.
func latinFinal(w string) (final, rieul bool) {
	if len(w) == 1 || strings.ToUpper(w) == w {
		switch w[len(w)-1] {
		case 'L', 'R', 'l', 'r':
			return true, true
		case 'M', 'N', 'm', 'n':
			return true, false
		}
		return false, false
	}
	w = strings.ToLower(w)
	n := len(w)
	last := w[n-1]
	prev := byte(0)
	if n >= 2 {
		prev = w[n-2]
	}
	singleVowelBefore := isVowel(prev) && (n < 3 || !isVowel(w[n-3]))
	switch {
	case last == 'l' || last == 'e' && prev == 'l':
		return true, true
	case last == 'm' || last == 'n' || last == 'e' && (prev == 'm' || prev == 'n'):
		return true, false
	case last == 'g' && prev == 'n':
		return true, false
	case last == 'k' && (isVowel(prev) || prev == 'c'):
		return true, false
	case last == 'c' && isVowel(prev):
		return true, false
	case (last == 'p' || last == 'b' || last == 't') && singleVowelBefore:
		return true, false
	}
	return false, false
}

func isVowel(c byte) bool { return strings.IndexByte("aeiou", c) >= 0 }
