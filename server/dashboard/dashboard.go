package dashboard

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config configures the dashboard.
type Config struct {
	// BasePath prefixes every link the pages make ("" or a path such as
	// /kyu, without a trailing slash); the handler itself is served with
	// it stripped.
	BasePath string
	// ReadOnly hides every action.
	ReadOnly bool
	// Version is the server's version, shown in the footer.
	Version string
	// Store describes the store (kind and URL without secrets).
	Store string
	// Sessions, when set, makes every page need a login; nil serves the
	// pages to anyone (a server without a token).
	Sessions *Sessions
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the dashboard's logs; nil discards them.
	Logger *slog.Logger
}

// Dashboard serves the pages. Build it with New.
type Dashboard struct {
	cfg    Config
	pages  *template.Template
	static http.Handler
	mux    *http.ServeMux
}

// pageData is what the layout template shows.
type pageData struct {
	Base     string
	Page     string
	Title    string
	ReadOnly bool
	Version  string
	Store    string
	Login    bool
	JobID    string
	Error    string
	Next     string
}

// New builds the dashboard.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pages, err := template.ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, fmt.Errorf("dashboard: static files: %w", err)
	}
	d := &Dashboard{cfg: cfg, pages: pages, static: http.StripPrefix("/static/", http.FileServerFS(sub))}
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", d.page("overview", "Overview"))
	m.HandleFunc("GET /jobs", d.page("jobs", "Jobs"))
	m.HandleFunc("GET /jobs/{id}", d.page("job", "Job"))
	m.HandleFunc("GET /queues", d.page("queues", "Queues"))
	m.HandleFunc("GET /workers", d.page("workers", "Workers"))
	m.HandleFunc("GET /periodic", d.page("periodic", "Periodic jobs"))
	m.HandleFunc("GET /enqueue", d.page("enqueue", "Enqueue"))
	m.HandleFunc("GET /login", d.loginPage)
	m.HandleFunc("POST /login", d.login)
	m.HandleFunc("POST /logout", d.logout)
	m.HandleFunc("GET /static/", d.serveStatic)
	m.HandleFunc("GET /favicon.ico", d.favicon)
	m.HandleFunc("/", d.notFound)
	d.mux = m
	return d, nil
}

// ServeHTTP serves a dashboard request with the security headers every
// answer carries.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	d.mux.ServeHTTP(w, r)
}

// cookiePath is the path the session cookie is sent under.
func (d *Dashboard) cookiePath() string { return d.cfg.BasePath + "/" }

// loggedIn reports whether r may see the pages.
func (d *Dashboard) loggedIn(r *http.Request) bool {
	return d.cfg.Sessions == nil || d.cfg.Sessions.Valid(r, d.cfg.Now())
}

// page serves one page's shell; the script fills it.
func (d *Dashboard) page(name, title string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !d.loggedIn(r) {
			next := r.URL.Path
			if r.URL.RawQuery != "" {
				next += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, d.cfg.BasePath+"/login?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		data := d.data(name, title)
		data.JobID = r.PathValue("id")
		d.render(w, http.StatusOK, data)
	}
}

// data is the common part of a page's data.
func (d *Dashboard) data(name, title string) pageData {
	return pageData{Base: d.cfg.BasePath, Page: name, Title: title, ReadOnly: d.cfg.ReadOnly,
		Version: d.cfg.Version, Store: d.cfg.Store, Login: d.cfg.Sessions != nil}
}

// render writes a page.
func (d *Dashboard) render(w http.ResponseWriter, status int, data pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := d.pages.ExecuteTemplate(w, "layout.html", data); err != nil {
		d.cfg.Logger.Warn("dashboard: render", "page", data.Page, "err", err)
	}
}

// serveStatic serves the script and style sheet. They are small and
// change with the binary, so browsers revalidate them.
func (d *Dashboard) serveStatic(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") { // no folder listings
		d.notFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	d.static.ServeHTTP(w, r)
}

// favicon answers a browser that asks for /favicon.ico with the icon the
// pages name.
func (d *Dashboard) favicon(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/static/favicon.svg"
	d.serveStatic(w, r2)
}

// notFound answers paths no page serves.
func (d *Dashboard) notFound(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	data := d.data("notfound", "Not found")
	data.Error = "No page at " + r.URL.Path
	d.render(w, http.StatusNotFound, data)
}

// loginPage shows the token form.
func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if d.cfg.Sessions == nil {
		http.Redirect(w, r, d.cfg.BasePath+"/", http.StatusSeeOther)
		return
	}
	data := d.data("login", "Log in")
	data.Next = safeNext(r.URL.Query().Get("next"))
	d.render(w, http.StatusOK, data)
}

// login checks the token of the login form and sets the session cookie.
// The server's cross-origin check has already refused a form posted from
// another site.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if d.cfg.Sessions == nil {
		http.Redirect(w, r, d.cfg.BasePath+"/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if !d.cfg.Sessions.CheckToken(strings.TrimSpace(r.PostForm.Get("token"))) {
		data := d.data("login", "Log in")
		data.Next, data.Error = next, "That is not the server's token."
		d.render(w, http.StatusUnauthorized, data)
		return
	}
	http.SetCookie(w, d.cfg.Sessions.Cookie(d.cfg.Now(), d.cookiePath(), r.TLS != nil))
	http.Redirect(w, r, d.cfg.BasePath+next, http.StatusSeeOther)
}

// logout ends the browser's session.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, ClearCookie(d.cookiePath(), r.TLS != nil))
	http.Redirect(w, r, d.cfg.BasePath+"/login", http.StatusSeeOther)
}

// safeNext keeps a post-login destination only when it is a path of this
// dashboard, so a link cannot send a user elsewhere after logging in.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	return next
}
