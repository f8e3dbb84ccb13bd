package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"golang.org/x/text/language"
)

// Languages of the pages: Korean, the sellers' own, and English.
const (
	langKO = "ko"
	langEN = "en"
)

// langCookie keeps the seller's choice from the language switch.
const langCookie = "bulkreg_lang"

// langMatcher picks Korean or English from Accept-Language; Korean first,
// so a browser that asks for neither gets Korean.
var langMatcher = language.NewMatcher([]language.Tag{language.Korean, language.English})

// pickLang chooses the page language: the switch (?lang=), then the
// remembered choice, then Accept-Language.
func pickLang(r *http.Request) string {
	if l := r.URL.Query().Get("lang"); l == langKO || l == langEN {
		return l
	}
	if c, err := r.Cookie(langCookie); err == nil && (c.Value == langKO || c.Value == langEN) {
		return c.Value
	}
	tags, _, err := language.ParseAcceptLanguage(r.Header.Get("Accept-Language"))
	if err != nil || len(tags) == 0 {
		return langKO
	}
	_, i, conf := langMatcher.Match(tags...)
	if i == 1 && conf != language.No {
		return langEN
	}
	return langKO
}

// messages are the pages' words, by key, in Korean and English. A key
// missing in one language is a test failure (TestEveryMessageInBothLanguages).
var messages = map[string][2]string{ // [ko, en]
	"skip":                 {"본문으로 건너뛰기", "Skip to content"},
	"nav":                  {"주 메뉴", "Main menu"},
	"nav.upload":           {"파일 올리기", "Upload"},
	"nav.uploads":          {"등록 내역", "Uploads"},
	"lang.switch":          {"언어", "Language"},
	"signed.in.as":         {"로그인: %s", "Signed in as %s"},
	"signout":              {"로그아웃", "Sign out"},
	"signin.title":         {"로그인이 필요합니다", "Please sign in"},
	"signin.bad":           {"이 로그인 링크는 만료되었거나 이미 사용되었습니다. 새 링크를 받아 주세요.", "This sign-in link has expired or was used already. Please get a new one."},
	"upload.title":         {"상품 파일 올리기", "Upload a product file"},
	"upload.intro":         {"템플릿에 상품을 한 줄에 하나씩 적어 올려 주세요. 한 파일에 최대 500개까지 등록할 수 있습니다.", "Fill in the template, one product a row, and upload it. A file holds at most 500 products."},
	"upload.template":      {"빈 템플릿 내려받기 (.xlsx)", "Download the empty template (.xlsx)"},
	"upload.file":          {"상품 파일 (.xlsx, .csv 또는 .txt)", "Product file (.xlsx, .csv or .txt)"},
	"upload.drop":          {"파일을 여기에 끌어다 놓거나 선택하세요.", "Drop the file here, or choose it."},
	"upload.hint":          {"먼저 '검사'로 오류를 확인하세요. 검사는 아무것도 등록하지 않습니다.", "Check first: it lists every problem and registers nothing."},
	"upload.check":         {"검사", "Check"},
	"upload.register":      {"등록", "Register"},
	"upload.again":         {"등록하려면 파일을 다시 선택한 뒤 '등록'을 누르세요.", "To register, choose the file again and press Register."},
	"upload.working":       {"검사 중…", "Checking…"},
	"check.title":          {"검사 결과", "Check result"},
	"check.summary":        {"%s: %s", "%s: %s"},
	"check.summary.other":  {"다른 내용으로 이미 등록됨 %d개", "%d already registered with different content"},
	"check.problems":       {"고칠 곳", "Problems to fix"},
	"check.warnings":       {"참고", "Worth knowing"},
	"check.preview":        {"미리보기", "Preview"},
	"check.row":            {"행", "Row"},
	"check.state":          {"상태", "State"},
	"check.norows":         {"아직 상품 행이 없습니다. 머리글 아래에 상품을 적어 주세요.", "No product rows yet: fill in the products below the header row."},
	"check.refused":        {"이 파일은 받을 수 없습니다", "This file cannot be accepted"},
	"row.valid":            {"등록 가능", "ready"},
	"row.invalid":          {"오류", "problem"},
	"row.already":          {"이미 등록됨", "already registered"},
	"uploads.title":        {"등록 내역", "Your uploads"},
	"uploads.none":         {"아직 올린 파일이 없습니다.", "No uploads yet."},
	"uploads.file":         {"파일", "File"},
	"uploads.created":      {"올린 시각", "Uploaded"},
	"uploads.progress":     {"진행", "Progress"},
	"uploads.older":        {"이전 내역", "Older uploads"},
	"uploads.new":          {"새 파일 올리기", "Upload a new file"},
	"uploads.other":        {"+ 다른 내용으로 이미 등록됨 %d", "+ %d already registered with different content"},
	"detail.title":         {"등록 진행 상황", "Registration progress"},
	"detail.file":          {"파일 %s, %s에 올림", "File %s, uploaded %s"},
	"detail.duplicate":     {"이 파일은 전에 올린 적이 있어 다시 등록하지 않았습니다.", "This file was uploaded before; nothing was registered again."},
	"detail.registered":    {"등록됨", "Registered"},
	"detail.already":       {"이미 등록됨", "Already registered"},
	"detail.failed":        {"실패", "Failed"},
	"detail.waiting":       {"대기 중", "Waiting"},
	"detail.total":         {"전체", "Total"},
	"detail.percent":       {"%d%% 완료", "%d%% done"},
	"detail.eta":           {"약 %s 후, %s에 마지막 행이 등록될 예정입니다.", "The last row will be registered in about %s, at %s."},
	"detail.eta.now":       {"곧 끝납니다.", "Finishing now."},
	"detail.eta.none":      {"완료 예상 시각을 아직 알 수 없습니다.", "No finish estimate yet."},
	"detail.done":          {"모든 행을 처리했습니다.", "Every row is done."},
	"detail.finished":      {"마지막 행을 %s에 처리했습니다.", "The last row was done at %s."},
	"live.signedout":       {"로그아웃되어 이 페이지는 더 이상 갱신되지 않습니다. 판매자 센터에서 다시 로그인해 주세요.", "You are signed out, so this page no longer updates. Sign in again from your seller center."},
	"detail.live":          {"진행 상황은 자동으로 갱신됩니다.", "Progress updates by itself."},
	"detail.failedrows":    {"실패한 행", "Failed rows"},
	"detail.nofailed":      {"실패한 행이 없습니다.", "No row failed."},
	"detail.field":         {"항목", "Field"},
	"detail.reason":        {"사유", "Reason"},
	"detail.report":        {"전체 결과 내려받기 (.xlsx)", "Download the full report (.xlsx)"},
	"detail.failedonly":    {"실패한 행만 내려받기 (고쳐서 다시 올릴 수 있습니다)", "Download the failed rows only (fix and upload them again)"},
	"detail.publishing":    {"행을 등록 대기열에 넣는 중입니다.", "The rows are being queued for registration."},
	"detail.publishfail":   {"행을 등록 대기열에 넣지 못했습니다. 같은 파일을 다시 올려 주세요.", "The rows could not be queued. Please upload the same file again."},
	"state.publishing":     {"준비 중", "queuing"},
	"state.published":      {"등록 중", "registering"},
	"state.publish_failed": {"다시 올려 주세요", "upload again"},
	"state.done":           {"완료", "done"},
	"notfound.title":       {"찾을 수 없습니다", "Not found"},
	"notfound.body":        {"이 주소의 내역이 없습니다.", "There is nothing at this address."},
	"badparam.title":       {"잘못된 주소입니다", "Bad address"},
	"badparam.body":        {"이 주소의 매개변수 값은 true 또는 false여야 합니다.", "A parameter of this address must be true or false."},
	"forbidden.title":      {"요청을 거부했습니다", "Request refused"},
	"forbidden.body":       {"다른 사이트에서 보낸 요청이거나 페이지가 오래되었습니다. 페이지를 새로 고친 뒤 다시 시도해 주세요.", "The request came from another site, or the page is stale. Reload the page and try again."},
	"error.title":          {"잠시 후 다시 시도해 주세요", "Please try again shortly"},
	"dur.min":              {"%d분 %d초", "%d min %d s"},
	"dur.sec":              {"%d초", "%d s"},
	// Pages: the outage, end states, the register plan, waiting, sign-in and sign-out.
	"outage.title":          {"마켓플레이스가 응답하지 않습니다", "The marketplace is not answering"},
	"outage.body":           {"상품 등록 API가 지금 응답하지 않아 등록을 잠시 멈췄습니다. 잃어버린 행은 없고 실패로 처리되는 행도 없습니다. 마켓플레이스가 다시 응답하면 행이 자동으로 이어서 등록됩니다. 이 페이지를 닫아도 됩니다.", "The marketplace's registration API is not answering, so registering is on hold. No row is lost and none is counted as failed for it; the rows continue by themselves once it answers again. You may close this page."},
	"outage.eta":            {"마켓플레이스가 다시 응답할 때까지 완료 시각을 알 수 없습니다.", "The finish time is unknown until the marketplace answers again."},
	"failing.title":         {"마켓플레이스가 이 판매자의 등록을 받지 못하고 있습니다", "The marketplace is failing your registrations"},
	"failing.body":          {"마켓플레이스가 지금 이 판매자의 등록 요청에 오류로 답하고 있습니다. bulkreg가 행마다 다시 시도하고, 끝내 받지 못한 행은 운영자가 다시 보내도록 따로 둡니다. 잃어버리는 행은 없습니다. 이 페이지를 닫아도 됩니다.", "The marketplace is answering your rows with errors right now. bulkreg retries each row; a row it still cannot register is set aside for an operator to send again. No row is lost. You may close this page."},
	"failing.eta":           {"마켓플레이스가 이 판매자의 등록을 다시 받을 때까지 완료 시각을 알 수 없습니다.", "The finish time is unknown until the marketplace takes your rows again."},
	"paused.title":          {"등록이 일시 중지되었습니다", "Registration is paused"},
	"paused.body":           {"마켓플레이스가 bulkreg의 접속을 거부해 운영자가 설정을 고쳐야 합니다. 잃어버린 행은 없고 실패로 처리되는 행도 없습니다. 고쳐지면 행이 자동으로 이어서 등록됩니다. 이 페이지를 닫아도 됩니다.", "The marketplace refused bulkreg's access; an operator has to fix it. No row is lost and none is counted as failed for it; the rows continue by themselves once it is fixed. You may close this page."},
	"paused.eta":            {"등록이 다시 시작될 때까지 완료 시각을 알 수 없습니다.", "The finish time is unknown until registering resumes."},
	"state.done.ok":         {"모두 등록됨", "all registered"},
	"state.done.other":      {"완료 (다른 내용으로 이미 등록된 상품 있음)", "done, some already registered with different content"},
	"state.done.partial":    {"일부 실패", "partly failed"},
	"state.done.failed":     {"모두 실패", "all failed"},
	"end.ok":                {"모든 행을 등록했습니다%s.", "Every row is registered%s."},
	"end.other":             {"완료: 다른 내용으로 이미 등록된 %[1]d개 행이 있고, 파일에서 고칠 행은 없습니다%[2]s.", "Done: %[1]d rows are registered already with different content, nothing to fix in the file%[2]s."},
	"end.partial":           {"일부 실패: %[2]d개 행 중 %[1]d개 행을 고쳐야 합니다.", "Partly failed: %[1]d of %[2]d rows need fixing;"},
	"end.partial.other":     {"%d개 행은 다른 내용으로 이미 등록되어 있고, 나머지는 등록되었습니다.", "%d rows are registered already with different content, the rest are registered."},
	"end.failed":            {"모두 실패: %d개 행을 모두 고쳐야 합니다. 등록된 행이 없습니다.", "All failed: all %d rows need fixing; none was registered."},
	"end.fix":               {"고칠 파일 내려받기: 실패한 %d개 행 (.xlsx)", "Download the fix file: %d failed rows (.xlsx)"},
	"end.fixhint":           {"이 파일에서 사유를 보고 고친 뒤 그대로 다시 올리면 됩니다.", "Fix the rows the file lists, with their reasons, and upload it again as it is."},
	"check.plan.all":        {"문제가 없습니다. '등록'을 누르면 %d개 행을 모두 등록합니다.", "No problems. Register registers all %d rows."},
	"check.plan":            {"'등록'을 누르면 %s을 등록하고, %s은 건너뜁니다.", "Register registers %s and skips %s."},
	"check.before.link":     {"그때의 등록 진행 상황 보기", "See how that upload went"},
	"check.plan.other":      {"다른 내용으로 이미 등록된 %d개 행", "%d rows registered already with different content"},
	"check.plan.none.other": {"다른 내용으로 이미 등록된 %d개 행", "%d rows are registered already with different content"},
	"check.plan.none":       {"등록할 행이 없습니다: %s.", "Nothing to register: %s."},
	"check.plan.allready":   {"%d개 행이 모두 이미 등록되어 있습니다. 새로 등록할 행이 없습니다.", "All %d rows are registered already; there is nothing new to register."},
	"confirm.title":         {"건너뛰는 행이 있습니다. 등록할까요?", "Some rows will be skipped. Register anyway?"},
	"confirm.register":      {"%d개 행 등록", "Register %d rows"},
	"confirm.cancel":        {"취소", "Cancel"},
	"confirm.again":         {"그래도 등록하려면 파일을 다시 선택한 뒤 '%d개 행 등록'을 누르세요.", "To register anyway, choose the file again and press Register %d rows."},
	"wait.ahead":            {"먼저 올린 파일의 %[1]s개 행이 앞에 있어 그 행들이 끝난 뒤 이 파일의 행이 등록됩니다. 마켓플레이스는 판매자마다 %[3]s에 %[2]d건까지만 등록을 허용합니다.", "%[1]s rows of your earlier uploads are ahead of this one: the marketplace registers at most %[2]d per %[3]s for each seller, so this file's rows start when those are done."},
	"wait.pace":             {"마켓플레이스는 판매자마다 %[2]s에 %[1]d건까지만 등록을 허용하므로 그 속도로 등록합니다.", "The marketplace allows %d registrations per %s per seller; rows are registered at that pace."},
	"wait.close":            {"이 페이지를 닫아도 등록은 계속됩니다.", "You may close this page; registering goes on."},
	"win.min1":              {"1분", "minute"},
	"win.min":               {"%d분", "%d minutes"},
	"win.sec":               {"%d초", "%d seconds"},
	"back.uploads":          {"등록 내역으로 돌아가기", "Back to your uploads"},
	"signout.confirm":       {"로그아웃할까요? 등록 중인 행은 로그아웃해도 계속 등록됩니다.", "Sign out? Rows being registered go on after you sign out."},
	"signout.done":          {"로그아웃했습니다", "You are signed out"},
	"signout.done.body":     {"등록 중인 행은 로그아웃해도 계속 등록됩니다.", "Rows being registered go on."},
	"signout.yes":           {"로그아웃하기", "Yes, sign out"},

	// Where a sign-in link comes from (signin.html): the seller center,
	// linked when Server.SellerCenterURL is set.
	"signin.center":       {"판매자 센터에 로그인한 뒤 bulkreg 로그인 링크를 열어 주세요. 링크는 한 번만, 잠깐 동안 쓸 수 있습니다.", "Sign in to your seller center and open the bulkreg sign-in link there. A link works once, for a short while."},
	"signin.center.link":  {"판매자 센터에서 로그인하기", "Sign in at the seller center"},
	"signin.nocenter":     {"판매자 센터에 로그인한 뒤 bulkreg 로그인 링크를 열어 주세요. 링크는 한 번만, 잠깐 동안 쓸 수 있습니다. 판매자 센터 주소를 모르면 bulkreg 운영자에게 물어 주세요.", "Sign in to your seller center and open the bulkreg sign-in link there. A link works once, for a short while. If you do not know the seller center's address, ask the bulkreg operator."},
	"session.ended.title": {"다시 로그인해 주세요", "Please sign in again"},
	"session.ended.body":  {"로그아웃했거나 로그인 시간이 지나서 이 파일을 검사하거나 등록하지 않았습니다. 다시 로그인한 뒤 파일을 다시 올려 주세요.", "You signed out, or your sign-in expired, so this file was neither checked nor registered. Sign in again, then upload the file again."},

	// A file refused before it was read or checked (problem.go refuse):
	// what happened, what to do, when to try again.
	"refused.title":       {"지금은 이 파일을 받을 수 없습니다", "This file cannot be taken right now"},
	"refused.seller":      {"먼저 보낸 파일 %[1]d개를 아직 처리하고 있어 이 파일은 검사하지도 등록하지도 않았습니다. 그 파일의 처리가 끝나면, 약 %[2]s 후에 다시 시도해 주세요.", "Your %[1]d files sent before are still being handled, so this file was neither checked nor registered. Try again once one of them is done, in about %[2]s."},
	"refused.seller.one":  {"먼저 보낸 파일 %[1]d개를 아직 처리하고 있어 이 파일은 검사하지도 등록하지도 않았습니다. 그 파일의 처리가 끝나면, 약 %[2]s 후에 다시 시도해 주세요.", "Your %[1]d file sent before is still being handled, so this file was neither checked nor registered. Try again once it is done, in about %[2]s."},
	"refused.busy":        {"지금 많은 파일을 처리하고 있어 이 파일은 검사하지도 등록하지도 않았습니다. 약 %s 후에 다시 시도해 주세요.", "bulkreg is handling many files right now, so this file was neither checked nor registered. Try again in about %s."},
	"refused.large.title": {"파일이 너무 큽니다", "The file is too large"},
	"refused.large":       {"파일이 %s보다 커서 검사하지도 등록하지도 않았습니다. 상품을 여러 파일로 나눠 올려 주세요.", "The file is larger than %s, so it was neither checked nor registered. Split the products over several files and upload each."},
	"refused.slow.title":  {"파일이 끝까지 오지 않았습니다", "The file did not arrive in time"},
	"refused.slow":        {"파일이 너무 느리게 와서 검사하지도 등록하지도 않았습니다. 연결이 더 빠른 곳에서 다시 올려 주세요.", "The file arrived too slowly, so it was neither checked nor registered. Upload it again over a faster connection."},

	// A seller's share of the upload storage is full.
	"share.title":      {"올린 파일을 더 보관할 공간이 없습니다", "Your upload storage is full"},
	"share.body":       {"지금 보관 중인 업로드 %[1]d개(%[2]s)가 판매자별 보관 한도(%[3]s)를 다 써서 이 파일을 받을 수 없습니다. 이전 업로드가 만료되면 약 %[4]s 후에 다시 올릴 수 있습니다. 등록할 행이 없던 업로드는 일찍 만료됩니다. 더 빨리 올려야 하면 운영자에게 오래된 업로드 삭제나 한도 확대를 요청해 주세요.", "Your %[1]d uploads kept now (%[2]s) use your whole storage share (%[3]s), so this file was not taken. Older uploads expire and make room in about %[4]s; uploads with nothing to register expire sooner. To upload sooner, ask the operator to delete old uploads or raise your share."},
	"share.body.never": {"이 파일의 결과(%[1]s)가 판매자별 보관 한도(%[2]s)보다 커서 받을 수 없습니다. 파일을 나눠 올리거나 운영자에게 한도 확대를 요청해 주세요.", "This file's results (%[1]s) are larger than your whole storage share (%[2]s), so it was not taken. Split the file, or ask the operator to raise your share."},
	"share.both":       {"업로드 %d개 또는 %s", "%d uploads or %s"},
	"share.count":      {"업로드 %d개", "%d uploads"},
	"share.size":       {"%s", "%s"},
	"share.hours":      {"%d시간", "%d hours"},
	"share.days":       {"%d일", "%d days"},

	// A sign-in link's page (signin.go): the link is used only by the button.
	"signin.confirm.title": {"%s 판매자로 로그인할까요?", "Sign in as seller %s?"},
	"signin.confirm.body":  {"아래 버튼을 눌러야 로그인됩니다. 메신저의 링크 미리보기 등이 링크를 먼저 열어도 링크는 그대로 쓸 수 있습니다.", "You are signed in when you press the button below, so a chat app's link preview that opened the link first has not used it up."},
	"signin.confirm.yes":   {"%s 판매자로 로그인", "Sign in as seller %s"},
	"switch.title":         {"다른 판매자로 바꿀까요?", "Switch to another seller?"},
	"switch.body":          {"지금 %[1]s 판매자로 로그인되어 있습니다. 이 링크는 %[2]s 판매자의 로그인 링크입니다. 바꾸면 이후에 올리는 파일은 %[2]s 판매자의 상품으로 등록됩니다. 직접 받은 링크가 아니라면 바꾸지 마세요.", "You are signed in as seller %[1]s. This link signs in seller %[2]s: if you switch, the files you upload next register products for %[2]s. Do not switch unless you asked for this link yourself."},
	"switch.stay":          {"%s 판매자로 계속하기", "Stay signed in as %s"},
	"switch.yes":           {"%s 판매자로 바꾸기", "Switch to seller %s"},

	// Rows registered already with other content: a group apart.
	"detail.othercontent":     {"다른 내용으로 이미 등록됨", "Already registered with different content"},
	"detail.othercontent.why": {"이 상품들은 이미 다른 내용으로 등록되어 있어 일괄 등록으로 바꾸지 않았습니다. 파일에는 문제가 없습니다. 가격이나 재고는 판매자 센터의 상품 관리에서 바꿔 주세요.", "These products are already registered with different content, which bulk registration does not change; nothing is wrong with the file. Change their price or stock in the seller center's product management."},
	"detail.twice":            {"두 번 등록됨", "Registered twice"},
	"detail.twice.why":        {"이 행들은 등록되었지만, 같은 판매자상품코드의 상품이 이미 마켓플레이스에 있었습니다. 판매자 센터의 상품 관리에서 같은 코드의 상품 두 개 가운데 하나씩 지워 주세요. 파일에는 문제가 없습니다.", "These rows were registered, but the marketplace already held a product with the same seller SKU, so it now holds two. Delete one of each pair in the seller center's product management; nothing is wrong with the file."},

	// The bounds of what a page shows (bounds.go): what was left out.
	"check.preview.cut": {"미리보기는 전체 %[3]s, %[4]s 가운데 첫 %[1]s과 %[2]s만 보여 줍니다. 검사는 모든 행과 열에 했습니다.",
		"The preview shows the first %[1]s and %[2]s only, of %[3]s and %[4]s; every row and column was checked."},
	"check.problems.more": {"문제 %d개는 여기에 보여 주지 않았습니다. 위의 문제를 고친 뒤 다시 검사하면 나머지를 보여 줍니다. '등록'한 뒤 받는 고칠 파일에는 행마다 모든 문제가 있습니다.",
		"%d more problems are not listed here. Fix the ones above and check again to see the rest; the fix file you get after Register lists every row's problems."},
	"check.warnings.more":     {"참고할 내용 %d개는 보여 주지 않았습니다.", "%d more notes are not shown."},
	"check.fileproblems.more": {"문제 %d개는 보여 주지 않았습니다. 위의 문제를 고친 뒤 다시 올려 주세요.", "%d more problems are not shown; fix the ones above and upload again."},
	"detail.rows.more":        {"%d개 행은 여기에 보여 주지 않았습니다. 고칠 파일(.xlsx)에 모든 행과 사유가 있습니다.", "%d more rows are not listed here; the fix file (.xlsx) has every row and its reason."},
	"detail.rows.more.report": {"%d개 행은 여기에 보여 주지 않았습니다. 전체 결과(.xlsx)에 모든 행과 사유가 있습니다.", "%d more rows are not listed here; the full report (.xlsx) has every row and its reason."},
	"uploads.twice":           {"(두 번 등록됨 %d)", "(%d registered twice)"},
	"end.twice":               {"%d개 행은 마켓플레이스에 같은 코드의 상품이 이미 있어 두 번 등록되었으니, 아래 목록을 보고 하나씩 지워 주세요.", "%d rows were registered while the marketplace already held their seller SKU: delete one product of each pair listed below."},

	// Counts said in parts (counts.go), each only when it is not 0, and a
	// row's number.
	"check.rownum":            {"%d행", "Row %d"},
	"n.rows":                  {"%d개 행", "%d rows"},
	"n.cols":                  {"%d개 열", "%d columns"},
	"check.summary.valid":     {"등록 가능 %d개", "%d ready"},
	"check.summary.invalid":   {"오류 %d개", "%d with problems"},
	"check.summary.already":   {"이미 등록됨 %d개", "%d already registered"},
	"check.plan.rows":         {"%d개 행", "%d rows"},
	"check.plan.invalid":      {"오류가 있는 %d개 행", "%d rows with problems"},
	"check.plan.already":      {"이미 등록된 %d개 행", "%d rows registered already"},
	"check.plan.none.invalid": {"오류가 있는 %d개 행", "%d rows have problems"},
	"check.plan.none.already": {"이미 등록된 %d개 행", "%d rows are registered already"},
	"check.plan.fixfirst":     {"오류를 고친 뒤 다시 올려 주세요.", "Fix the problems and upload again."},
	"end.now":                 {"이번에 등록한 %d개 행", "%d registered now"},
	"end.before":              {"이미 등록되어 있던 %d개 행", "%d already"},
	"end.partial.rest":        {"나머지는 등록되었습니다.", "the rest are registered."},
	"end.partial.others":      {"%d개 행은 다른 내용으로 이미 등록되어 있습니다.", "%d rows are registered already with different content."},

	// The forms for one (msgN): "1 row", "1 is".
	"n.rows.one":                  {"%d개 행", "%d row"},
	"n.cols.one":                  {"%d개 열", "%d column"},
	"check.plan.all.one":          {"문제가 없습니다. '등록'을 누르면 %d개 행을 등록합니다.", "No problems. Register registers %d row."},
	"check.plan.rows.one":         {"%d개 행", "%d row"},
	"check.plan.invalid.one":      {"오류가 있는 %d개 행", "%d row with problems"},
	"check.plan.already.one":      {"이미 등록된 %d개 행", "%d row registered already"},
	"check.plan.other.one":        {"다른 내용으로 이미 등록된 %d개 행", "%d row registered already with different content"},
	"check.plan.none.invalid.one": {"오류가 있는 %d개 행", "%d row has problems"},
	"check.plan.none.already.one": {"이미 등록된 %d개 행", "%d row is registered already"},
	"check.plan.none.other.one":   {"다른 내용으로 이미 등록된 %d개 행", "%d row is registered already with different content"},
	"check.plan.allready.one":     {"%d개 행이 이미 등록되어 있습니다. 새로 등록할 행이 없습니다.", "%d row is registered already; there is nothing new to register."},
	"confirm.register.one":        {"%d개 행 등록", "Register %d row"},
	"confirm.again.one":           {"그래도 등록하려면 파일을 다시 선택한 뒤 '%d개 행 등록'을 누르세요.", "To register anyway, choose the file again and press Register %d row."},
	"end.other.one":               {"완료: 다른 내용으로 이미 등록된 %[1]d개 행이 있고, 파일에서 고칠 행은 없습니다%[2]s.", "Done: %[1]d row is registered already with different content, nothing to fix in the file%[2]s."},
	"end.partial.one":             {"일부 실패: %[2]d개 행 중 %[1]d개 행을 고쳐야 합니다.", "Partly failed: %[1]d of %[2]d rows needs fixing;"},
	"end.partial.other.one":       {"%d개 행은 다른 내용으로 이미 등록되어 있고, 나머지는 등록되었습니다.", "%d row is registered already with different content, the rest are registered."},
	"end.partial.others.one":      {"%d개 행은 다른 내용으로 이미 등록되어 있습니다.", "%d row is registered already with different content."},
	"end.failed.one":              {"모두 실패: %d개 행을 고쳐야 합니다. 등록된 행이 없습니다.", "All failed: %d row needs fixing; it was not registered."},
	"end.fix.one":                 {"고칠 파일 내려받기: 실패한 %d개 행 (.xlsx)", "Download the fix file: %d failed row (.xlsx)"},
	"wait.ahead.one":              {"먼저 올린 파일의 %[1]s개 행이 앞에 있어 그 행이 끝난 뒤 이 파일의 행이 등록됩니다. 마켓플레이스는 판매자마다 %[3]s에 %[2]d건까지만 등록을 허용합니다.", "%[1]s row of your earlier uploads is ahead of this one: the marketplace registers at most %[2]d per %[3]s for each seller, so this file's rows start when it is done."},
	"wait.pace.one":               {"마켓플레이스는 판매자마다 %[2]s에 %[1]d건까지만 등록을 허용하므로 그 속도로 등록합니다.", "The marketplace allows %d registration per %s per seller; rows are registered at that pace."},
	"win.sec.one":                 {"%d초", "%d second"},
	"share.body.one":              {"지금 보관 중인 업로드 %[1]d개(%[2]s)가 판매자별 보관 한도(%[3]s)를 다 써서 이 파일을 받을 수 없습니다. 이전 업로드가 만료되면 약 %[4]s 후에 다시 올릴 수 있습니다. 등록할 행이 없던 업로드는 일찍 만료됩니다. 더 빨리 올려야 하면 운영자에게 오래된 업로드 삭제나 한도 확대를 요청해 주세요.", "Your %[1]d upload kept now (%[2]s) uses your whole storage share (%[3]s), so this file was not taken. Older uploads expire and make room in about %[4]s; uploads with nothing to register expire sooner. To upload sooner, ask the operator to delete old uploads or raise your share."},
	"share.both.one":              {"업로드 %d개 또는 %s", "%d upload or %s"},
	"share.count.one":             {"업로드 %d개", "%d upload"},
	"share.hours.one":             {"%d시간", "%d hour"},
	"share.days.one":              {"%d일", "%d day"},
	"check.problems.more.one": {"문제 %d개는 여기에 보여 주지 않았습니다. 위의 문제를 고친 뒤 다시 검사하면 나머지를 보여 줍니다. '등록'한 뒤 받는 고칠 파일에는 행마다 모든 문제가 있습니다.",
		"%d more problem is not listed here. Fix the ones above and check again to see it; the fix file you get after Register lists every row's problems."},
	"check.warnings.more.one":     {"참고할 내용 %d개는 보여 주지 않았습니다.", "%d more note is not shown."},
	"check.fileproblems.more.one": {"문제 %d개는 보여 주지 않았습니다. 위의 문제를 고친 뒤 다시 올려 주세요.", "%d more problem is not shown; fix the ones above and upload again."},
	"detail.rows.more.one":        {"%d개 행은 여기에 보여 주지 않았습니다. 고칠 파일(.xlsx)에 그 행과 사유가 있습니다.", "%d more row is not listed here; the fix file (.xlsx) has every row and its reason."},
	"detail.rows.more.report.one": {"%d개 행은 여기에 보여 주지 않았습니다. 전체 결과(.xlsx)에 그 행과 사유가 있습니다.", "%d more row is not listed here; the full report (.xlsx) has it and its reason."},
	"end.twice.one":               {"%d개 행은 마켓플레이스에 같은 코드의 상품이 이미 있어 두 번 등록되었으니, 아래 목록을 보고 하나를 지워 주세요.", "%d row was registered while the marketplace already held its seller SKU: delete one of the two products listed below."},
}

func langIndex(lang string) int {
	if lang == langEN {
		return 1
	}
	return 0
}

// msg returns the page text of key in lang, formatted with args. A text
// that counts something has a form for one, key + ".one" ("1 row"): it is
// chosen when the first argument is the int 1 (msgN).
func msg(lang, key string, args ...any) string {
	if len(args) > 0 {
		if n, ok := args[0].(int); ok {
			return msgN(lang, key, n, args...)
		}
	}
	return format(lang, key, args)
}

// msgN is msg with the form for the count n: key + ".one" when n is 1 and
// the key has one.
func msgN(lang, key string, n int, args ...any) string {
	if _, ok := messages[key+".one"]; ok && n == 1 {
		key += ".one"
	}
	return format(lang, key, args)
}

func format(lang, key string, args []any) string {
	m, ok := messages[key]
	if !ok {
		return key
	}
	s := m[langIndex(lang)]
	if len(args) > 0 {
		return fmt.Sprintf(s, args...)
	}
	return s
}

// fmtDuration says a wait the way a seller reads it: "3 min 12 s".
func fmtDuration(lang string, d time.Duration) string {
	s := int((d + time.Second/2) / time.Second)
	if s < 60 {
		return msg(lang, "dur.sec", s)
	}
	return msg(lang, "dur.min", s/60, s%60)
}

// jsMessages are the texts the progress page's script needs, as JSON.
func jsMessages(lang string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"detail.eta", "detail.eta.now", "detail.eta.none", "detail.done", "detail.percent", "dur.min", "dur.sec",
		"outage.eta", "failing.eta", "paused.eta", "state.done.ok", "state.done.other", "state.done.partial", "state.done.failed", "end.fix", "detail.rows.more", "detail.rows.more.report",
		"live.signedout"} {
		out[k] = msg(lang, k)
		if _, ok := messages[k+".one"]; ok { // the script says "1 row" as the page does (app.js say)
			out[k+".one"] = msg(lang, k+".one")
		}
	}
	for _, s := range []string{"publishing", "published", "publish_failed", "done"} {
		out["state."+s] = msg(lang, "state."+s)
	}
	return out
}
