/*
 * html.c — a run, or a sweep, as one self-contained HTML page to look at:
 * the verdict and the key numbers of the text report on top, then the
 * charts (charts.c, drawn as inline SVG by plot.c), memory by kind and the
 * growth kinds' table, the census of Python objects, the flight recorder's
 * table, the ends of the job's processes, and for a sweep the table of its
 * trials.
 *
 * Self-contained means one file that loads nothing: the CSS, the SVG and
 * the little JavaScript (hover, sorting) are inline, and a
 * Content-Security-Policy meta forbids any other load, so the page opens
 * the same offline, from a CI artifact or attached to an issue. Without
 * JavaScript the charts and the table are all there; hover and sorting
 * are what it adds.
 *
 * Design notes: docs/internals/html-report.md. Units: bytes, seconds.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "judge/kinds.h"
#include "report/charts.h"
#include "report/render.h"

#define CSP "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " \
            "img-src data:; base-uri 'none'; form-action 'none'"

static const char css[] =
"body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#222;"
"background:#f6f7f9;margin:0;padding:20px 28px 40px}\n"
"h1{font-size:22px;margin:0 0 6px}h2{font-size:17px;margin:26px 0 8px}\n"
"code,pre{font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:12.5px}\n"
".cmd{margin:0 0 12px;color:#444;word-break:break-all}\n"
".verdict{font-size:17px;padding:10px 14px;border-radius:6px;margin:8px 0 12px;border-left:6px solid}\n"
".v-leak{background:#fdecea;border-color:#d62728}.v-no-leak{background:#eaf6ec;border-color:#2ca02c}\n"
".v-inconclusive{background:#fff6e0;border-color:#e0a000}\n"
".cards{display:flex;flex-wrap:wrap;gap:10px;margin:0 0 12px}\n"
".card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:120px}\n"
".card b{display:block;font-size:18px}.card span{color:#666;font-size:12px}\n"
"pre.summary{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 12px;overflow-x:auto}\n"
".chart{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px;display:inline-block;"
"max-width:100%;overflow-x:auto}\n"
".note{color:#666;font-size:12.5px;margin:4px 0}\n"
"table{border-collapse:collapse;background:#fff;font-size:13px}\n"
"th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;white-space:nowrap}\n"
"td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#eef0f3}\n"
"table.lp-sortable th{cursor:pointer;user-select:none}\n"
"th[aria-sort=ascending]::after{content:' \\25B2'}th[aria-sort=descending]::after{content:' \\25BC'}\n"
".sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;vertical-align:-1px}\n"
"#lp-tip{position:absolute;display:none;pointer-events:none;background:rgba(255,255,255,.96);"
"border:1px solid #999;border-radius:4px;padding:5px 8px;font-size:12px;box-shadow:0 2px 6px rgba(0,0,0,.15)}\n"
"#lp-tip div{white-space:nowrap}footer{margin-top:30px;color:#888;font-size:12px}\n";

/* Hover on every chart from its data block; sorting of lp-sortable tables
 * (a click on a header, or #sort=KEY / #sort=-KEY in the address); then
 * each chart's drawing area is noted in data-box (page pixels) and the
 * page marked data-lp-ready, for tests and tools that read the DOM. */
static const char js[] =
"(function(){'use strict';\n"
"var NS='http://www.w3.org/2000/svg',tip=document.getElementById('lp-tip');\n"
"function fb(b){var a=Math.abs(b),u=['B','KiB','MiB','GiB','TiB'],i=0;while(a>=1024&&i<4){a/=1024;i++;}\n"
" return (b<0?'-':'')+(i?a.toFixed(a<10?2:a<100?1:0):a.toFixed(0))+' '+u[i];}\n"
"function fv(v,k){if(v===null||v===undefined)return '-';if(k==='bytes')return fb(v);\n"
" if(k==='seconds')return v.toFixed(v<100?2:1)+' s';return Number.isInteger(v)?String(v):v.toPrecision(5);}\n"
"function near(xs,x){var lo=0,hi=xs.length-1;if(hi<0)return -1;while(hi-lo>1){var m=(lo+hi)>>1;\n"
" if(xs[m]<x)lo=m;else hi=m;}return Math.abs(xs[lo]-x)<=Math.abs(xs[hi]-x)?lo:hi;}\n"
"function sc(a,v){return a.p0+(v-a.lo)/(a.hi-a.lo)*(a.p1-a.p0);}\n"
"function hide(g){g.style.display='none';tip.style.display='none';}\n"
"document.querySelectorAll('script.lp-data').forEach(function(el){\n"
" var d=JSON.parse(el.textContent),svg=document.querySelector('svg[data-plot=\"'+d.id+'\"]');if(!svg)return;\n"
" var g=document.createElementNS(NS,'g');g.setAttribute('class','lp-hover');g.style.display='none';svg.appendChild(g);\n"
" var ln=document.createElementNS(NS,'line');ln.setAttribute('stroke','#444');ln.setAttribute('stroke-width','0.8');\n"
" ln.setAttribute('y1',Math.min(d.y.p0,d.y.p1));ln.setAttribute('y2',Math.max(d.y.p0,d.y.p1));g.appendChild(ln);\n"
" var many=d.series.length>12;\n"
" var dots=d.series.map(function(s){var c=document.createElementNS(NS,'circle');c.setAttribute('r','3.5');\n"
"  c.setAttribute('fill',s.color);c.setAttribute('stroke','#fff');g.appendChild(c);return c;});\n"
" svg.addEventListener('mousemove',function(ev){var m=svg.getScreenCTM();if(!m)return;\n"
"  var pt=svg.createSVGPoint();pt.x=ev.clientX;pt.y=ev.clientY;var p=pt.matrixTransform(m.inverse());\n"
"  if(p.x<d.x.p0||p.x>d.x.p1){hide(g);return;}\n"
"  var x=d.x.lo+(p.x-d.x.p0)/(d.x.p1-d.x.p0)*(d.x.hi-d.x.lo),rows=[],at=null,best=Infinity;\n"
"  d.series.forEach(function(s,k){var i=near(s.x,x);if(i<0){dots[k].style.display='none';return;}\n"
"   var ax=s.right?d.y2:d.y,cy=sc(ax,s.y[i]);dots[k].style.display='';\n"
"   dots[k].setAttribute('cx',sc(d.x,s.x[i]));dots[k].setAttribute('cy',cy);\n"
"   if(at===null)at=s.x[i];var dy=Math.abs(cy-p.y);\n"
"   rows.push([dy,s.color,s.name,fv(s.y[i],ax.kind),fv(s.x[i],d.x.kind)]);});\n"
"  if(at===null){hide(g);return;}\n"
"  if(many){rows.sort(function(a,b){return a[0]-b[0];});rows=rows.slice(0,6);}\n"
"  ln.setAttribute('x1',sc(d.x,at));ln.setAttribute('x2',sc(d.x,at));g.style.display='';\n"
"  tip.textContent='';var h=document.createElement('div');h.style.fontWeight='bold';\n"
"  h.textContent=d.xlabel+' '+rows[0][4];tip.appendChild(h);\n"
"  rows.forEach(function(r){var e=document.createElement('div'),sw=document.createElement('span');\n"
"   sw.className='sw';sw.style.background=r[1];e.appendChild(sw);e.appendChild(document.createTextNode(r[2]+': '+r[3]));\n"
"   tip.appendChild(e);});\n"
"  tip.style.display='block';tip.style.left=(ev.pageX+14)+'px';tip.style.top=(ev.pageY+14)+'px';});\n"
" svg.addEventListener('mouseleave',function(){hide(g);});});\n"
"function sortBy(t,c,dir){var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),\n"
" num=t.tHead.rows[0].cells[c].getAttribute('data-type')==='num';\n"
" function key(r){var e=r.cells[c],v=e.hasAttribute('data-v')?e.getAttribute('data-v'):e.textContent;\n"
"  return num?(v===''?NaN:parseFloat(v)):v;}\n"
" rows.sort(function(a,z){var u=key(a),w=key(z);if(num){if(isNaN(u)||isNaN(w))return isNaN(u)-isNaN(w);\n"
"  return dir*(u-w);}return dir*String(u).localeCompare(String(w),undefined,{numeric:true});});\n"
" rows.forEach(function(r){b.appendChild(r);});\n"
" Array.prototype.forEach.call(t.tHead.rows[0].cells,function(h,i){\n"
"  if(i===c)h.setAttribute('aria-sort',dir>0?'ascending':'descending');else h.removeAttribute('aria-sort');});}\n"
"document.querySelectorAll('table.lp-sortable').forEach(function(t){\n"
" Array.prototype.forEach.call(t.tHead.rows[0].cells,function(h,i){h.tabIndex=0;\n"
"  function go(){sortBy(t,i,h.getAttribute('aria-sort')==='ascending'?-1:1);}\n"
"  h.addEventListener('click',go);h.addEventListener('keydown',function(e){if(e.key==='Enter')go();});});\n"
" var m=/^#sort=(-?)(.+)$/.exec(decodeURIComponent(location.hash||''));\n"
" if(m)Array.prototype.forEach.call(t.tHead.rows[0].cells,function(h,i){\n"
"  if(h.getAttribute('data-key')===m[2])sortBy(t,i,m[1]?-1:1);});});\n"
"document.querySelectorAll('svg.lp-plot').forEach(function(svg){var a=svg.querySelector('.lp-area')||svg,\n"
" r=a.getBoundingClientRect();svg.setAttribute('data-box',[r.left+window.scrollX,r.top+window.scrollY,\n"
" r.width,r.height].map(Math.round).join(','));});\n"
"document.documentElement.setAttribute('data-lp-ready','1');})();\n";

static void head(struct strbuf *sb, const char *title)
{
	strbuf_addstr(sb, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	              "<meta http-equiv=\"Content-Security-Policy\" content=\"" CSP "\">\n"
	              "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	              "<meta name=\"generator\" content=\"leakproof " LP_VERSION "\">\n<title>");
	plot_add_xml(sb, title);
	strbuf_addf(sb, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", css);
}

static void tail(struct strbuf *sb, const char *what)
{
	strbuf_addf(sb, "<footer>Made by leakproof %s from its store. Every point: <code>leakproof report %s "
	            "--format csv</code>.</footer>\n<div id=\"lp-tip\"></div>\n<script>\n%s</script>\n</body>\n</html>\n",
	            LP_VERSION, what, js);
}

/* A chart with its hover data and, when it drew fewer points than it was
 * given, a note saying so. */
static void chart(struct strbuf *sb, const struct plot *p)
{
	struct strbuf pts = STRBUF_INIT;
	struct plot_stats st;
	strbuf_addstr(sb, "<div class=\"chart\">\n");
	plot_svg(sb, p, false, &pts, &st);
	strbuf_addstr(sb, "</div>\n");
	if (st.downsampled) {
		char in[32], drawn[32];
		strbuf_addf(sb, "<p class=\"note lp-downsampled\">Downsampled for drawing: %s points drawn as %s "
		            "(the lowest and the highest of each pixel column, so no spike is lost).</p>\n",
		            render_count(in, sizeof(in), (double)st.points_in),
		            render_count(drawn, sizeof(drawn), (double)st.points_drawn));
	}
	/* "</" cannot appear inside the JSON: strings are escaped by
	 * strbuf_add_json_str, which leaves '/' alone, so guard it here */
	strbuf_addf(sb, "<script type=\"application/json\" class=\"lp-data\">");
	for (const char *c = strbuf_str(&pts); *c; c++) {
		if (c[0] == '<')
			strbuf_addstr(sb, "\\u003c");
		else
			strbuf_addch(sb, *c);
	}
	strbuf_addstr(sb, "</script>\n");
	strbuf_release(&pts);
}

static void card(struct strbuf *sb, const char *value, const char *what)
{
	strbuf_addstr(sb, "<div class=\"card\"><b>");
	plot_add_xml(sb, value);
	strbuf_addstr(sb, "</b><span>");
	plot_add_xml(sb, what);
	strbuf_addstr(sb, "</span></div>\n");
}

/* The text report, verbatim: every number the terminal shows. */
static void text_summary(struct strbuf *sb, const struct run_summary *s)
{
	struct strbuf text = STRBUF_INIT;
	report_write_text(s, NULL, &text);
	strbuf_addstr(sb, "<pre class=\"summary\">");
	plot_add_xml(sb, strbuf_str(&text));
	strbuf_addstr(sb, "</pre>\n");
	strbuf_release(&text);
}

static void add_header(struct strbuf *sb, const struct run_summary *s)
{
	char b[64], b2[64];
	struct strbuf cmd = STRBUF_INIT;
	const char *v = verdict_name(s->a.verdict);
	strbuf_addf(sb, "<header>\n<h1>leakproof run %lld</h1>\n<p class=\"cmd\"><code>", (long long)s->run.id);
	report_add_command_line(&cmd, s->argv, s->argc, 0);
	plot_add_xml(sb, strbuf_str(&cmd));
	strbuf_addstr(sb, "</code></p>\n");
	strbuf_release(&cmd);
	strbuf_addf(sb, "<p class=\"verdict v-%s\" id=\"verdict\"><b>%s</b> \xe2\x80\x94 ", v, v);
	plot_add_xml(sb, s->reason);
	strbuf_addstr(sb, "</p>\n");
	if (s->kinds && s->kinds->has_diagnosis) {   /* the kind that drives it */
		strbuf_addstr(sb, "<p class=\"diagnosis\" id=\"diagnosis\">");
		plot_add_xml(sb, s->kinds->diagnosis);
		strbuf_addstr(sb, "</p>\n");
	}
	if (s->kinds && s->kinds->oom) {              /* the flight recorder */
		strbuf_addstr(sb, "<p class=\"flight\" id=\"flight-recorder\"><b>The last seconds before the end:</b> ");
		plot_add_xml(sb, s->kinds->flight);
		strbuf_addstr(sb, "</p>\n");
	}
	strbuf_addstr(sb, "<div class=\"cards\">\n");
	if (render_have_slope(s)) {
		snprintf(b2, sizeof(b2), "growth%s (%s)", render_x_suffix(s), run_summary_measure_label(s));
		card(sb, render_signed_bytes(b, sizeof(b), s->a.slope), b2);
	}
	if (s->nsamples || s->steps)
		card(sb, fmt_bytes(b, sizeof(b), (double)s->peak_bytes), "peak");
	if (s->steps) {
		snprintf(b, sizeof(b), "%zu", s->steps);
		card(sb, b, "steps");
	}
	card(sb, fmt_duration(b, sizeof(b), s->duration_s), "duration");
	if (s->nsegments > 1) {
		snprintf(b, sizeof(b), "%zu", s->nsegments - 1);
		card(sb, b, s->nsegments == 2 ? "restart" : "restarts");
	}
	struct strbuf proj = STRBUF_INIT;
	if (render_projection(&proj, s))
		card(sb, strbuf_str(&proj), "to the limit at this rate");
	strbuf_release(&proj);
	strbuf_addstr(sb, "</div>\n");
	text_summary(sb, s);
	strbuf_addstr(sb, "</header>\n");
}

/* The processes of the run, when there is more than one or one ended
 * otherwise than by a clean exit. */
static void add_ends(struct strbuf *sb, const struct run_summary *s)
{
	char b[32];
	if (!render_has_ends(s))
		return;
	strbuf_addstr(sb, "<section id=\"ends\"><h2>How each process ended</h2>\n<table>\n<thead><tr><th>process</th>"
	              "<th>started</th><th>ended</th><th>cause</th><th>last step</th><th>memory at the end</th>"
	              "<th>evidence</th><th>restarted</th></tr></thead>\n<tbody>\n");
	for (size_t i = 0; i < s->nsegments; i++) {
		const struct segment_row *g = &s->segments[i];
		strbuf_addf(sb, "<tr><td>#%lld</td><td class=\"n\">%.1f s</td>", (long long)g->seq,
		            g->started_at - s->run.started_at);
		if (g->ended_at > 0)
			strbuf_addf(sb, "<td class=\"n\">%.1f s</td>", g->ended_at - s->run.started_at);
		else
			strbuf_addstr(sb, "<td>running</td>");
		strbuf_addstr(sb, "<td>");
		plot_add_xml(sb, g->cause != CAUSE_NONE ? cause_name(g->cause) : "-");
		strbuf_addstr(sb, "</td>");
		if (g->has_step)
			strbuf_addf(sb, "<td class=\"n\">%lld</td>", (long long)g->end_step);
		else
			strbuf_addstr(sb, "<td>-</td>");
		strbuf_addf(sb, "<td class=\"n\">%s</td><td>", g->memory_bytes ?
		            fmt_bytes(b, sizeof(b), (double)g->memory_bytes) : "-");
		plot_add_xml(sb, g->evidence);
		strbuf_addstr(sb, "</td><td>");
		plot_add_xml(sb, g->restart[0] ? g->restart : "-");
		strbuf_addstr(sb, "</td></tr>\n");
	}
	strbuf_addstr(sb, "</tbody></table></section>\n");
}

void report_html_add_alloc_sites(struct strbuf *sb, const struct alloc_site *rows, size_t n)
{
	char b[32];
	if (!n)
		return;
	strbuf_addstr(sb, "<section id=\"alloc-sites\"><h2>Top growing allocation sites</h2>\n"
	              "<table class=\"lp-sortable\">\n<thead><tr><th data-key=\"site\">site</th>"
	              "<th data-key=\"library\">library</th><th data-key=\"growth\" data-type=\"num\">growth/step</th>"
	              "<th data-key=\"live\" data-type=\"num\">live</th></tr></thead>\n<tbody>\n");
	for (size_t i = 0; i < n; i++) {
		strbuf_addstr(sb, "<tr class=\"lp-site\"><td><code>");
		plot_add_xml(sb, rows[i].label);
		strbuf_addstr(sb, "</code></td><td>");
		plot_add_xml(sb, rows[i].library);
		strbuf_addf(sb, "</td><td class=\"n\" data-v=\"%.17g\">%s</td>", rows[i].growth_bytes_per_step,
		            render_signed_bytes(b, sizeof(b), rows[i].growth_bytes_per_step));
		strbuf_addf(sb, "<td class=\"n\" data-v=\"%.17g\">%s</td></tr>\n", rows[i].live_bytes,
		            fmt_bytes(b, sizeof(b), rows[i].live_bytes));
	}
	strbuf_addstr(sb, "</tbody></table></section>\n");
}

static void add_quantile_table(struct strbuf *sb, const struct run_summary *s, const struct run_charts *c)
{
	static const char *const heads[5] = { "Min", "Q1", "Median", "Q3", "Max" };
	char label[64], b[32];
	render_change_label(label, sizeof(label), s);
	strbuf_addf(sb, "<table class=\"lp-quantiles\"><thead><tr><th>%s</th>", label);
	for (int q = 0; q < 5; q++)
		strbuf_addf(sb, "<th>%s</th>", heads[q]);
	strbuf_addf(sb, "</tr></thead><tbody><tr><td>%s</td>", run_summary_measure_label(s));
	for (int q = 0; q < 5; q++)
		strbuf_addf(sb, "<td class=\"n\">%s</td>", isfinite(c->q[q]) ? fmt_bytes(b, sizeof(b), c->q[q]) : "-");
	strbuf_addstr(sb, "</tr></tbody></table>\n");
}

void report_write_html(const struct run_summary *s, const struct report_extras *x, struct strbuf *sb)
{
	struct run_charts c;
	char title[160], b[64];
	run_charts_build(&c, s, x ? x->metrics : NULL, x ? x->nmetrics : 0, "run");

	snprintf(title, sizeof(title), "leakproof run %lld: %s", (long long)s->run.id, verdict_name(s->a.verdict));
	head(sb, title);
	add_header(sb, s);

	if (!c.have_steps && !c.have_time)
		strbuf_addf(sb, "<p class=\"note\">No memory was recorded for this run: nothing to draw.</p>\n");
	if (c.have_steps) {
		strbuf_addstr(sb, "<section id=\"memory-steps\"><h2>Memory over steps</h2>\n");
		chart(sb, &c.steps);
		strbuf_addstr(sb, "</section>\n");
	}
	if (c.have_time) {
		strbuf_addstr(sb, "<section id=\"memory-time\"><h2>Memory over time</h2>\n");
		chart(sb, &c.time);
		strbuf_addstr(sb, "</section>\n");
	}
	if (c.metrics_left_out)
		strbuf_addf(sb, "<p class=\"note\">%zu more metric%s not drawn (the first %d are).</p>\n",
		            c.metrics_left_out, c.metrics_left_out == 1 ? "" : "s", CHARTS_MAX_METRICS);
	if (c.have_change) {
		render_change_label(b, sizeof(b), s);
		strbuf_addf(sb, "<section id=\"change\"><h2>Distribution of the %s</h2>\n", b);
		chart(sb, &c.change);
		add_quantile_table(sb, s, &c);
		strbuf_addstr(sb, "</section>\n");
	}
	if (c.have_kinds) {
		strbuf_addstr(sb, "<section id=\"memory-kinds\"><h2>Memory by kind</h2>\n");
		chart(sb, &c.kinds);
		strbuf_addstr(sb, "<p class=\"note\">The job's processes summed: anonymous memory as RSS counts it "
		              "(pages a forked worker still shares with its parent count in both), the workers' "
		              "copy-on-write copies, the job's page cache (its cgroup's when it has one, else the "
		              "mapped file pages), shared memory, GPU memory.</p>\n</section>\n");
	}
	render_kinds_html(s, sb);
	if (s->census)
		census_report_html(s->census, sb);
	render_flight_html(s, sb);
	add_ends(sb, s);
	if (x && x->nsites)
		report_html_add_alloc_sites(sb, x->sites, x->nsites);

	snprintf(b, sizeof(b), "%lld", (long long)s->run.id);
	tail(sb, b);
	run_charts_release(&c);
}

/* ---- sweeps ------------------------------------------------------------- */

static void num_cell(struct strbuf *sb, double v, const char *text)
{
	if (isfinite(v))
		strbuf_addf(sb, "<td class=\"n\" data-v=\"%.17g\">", v);
	else
		strbuf_addstr(sb, "<td class=\"n\" data-v=\"\">");
	plot_add_xml(sb, isfinite(v) ? text : "-");
	strbuf_addstr(sb, "</td>");
}

static void text_cell(struct strbuf *sb, const char *v)
{
	strbuf_addstr(sb, "<td>");
	plot_add_xml(sb, v && v[0] ? v : "-");
	strbuf_addstr(sb, "</td>");
}

static void sweep_table(struct strbuf *sb, const struct sweep_charts *c)
{
	static const char *const fixed[][2] = {
		{ "status", "" }, { "cause", "" }, { "metric", "num" }, { "verdict", "" }, { "growth/step", "num" },
		{ "min", "num" }, { "q1", "num" }, { "median", "num" }, { "q3", "num" }, { "max", "num" },
		{ "steps/s", "num" }, { "peak", "num" }, { "run", "num" },
	};
	char b[48];
	strbuf_addstr(sb, "<table class=\"lp-sortable\" id=\"trials\">\n<thead><tr><th data-key=\"trial\" "
	              "data-type=\"num\">trial</th>");
	for (size_t d = 0; d < c->m.ndims; d++) {
		strbuf_addstr(sb, "<th data-key=\"");
		plot_add_xml(sb, c->m.dims[d]);
		strbuf_addstr(sb, "\">");
		plot_add_xml(sb, c->m.dims[d]);
		strbuf_addstr(sb, "</th>");
	}
	for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++) {
		if (!strcmp(fixed[k][0], "run") && c->m.have_pred)
			strbuf_addstr(sb, "<th data-key=\"predicted\" data-type=\"num\">predicted</th>");
		strbuf_addf(sb, "<th data-key=\"%s\"%s>%s</th>", fixed[k][0], fixed[k][1][0] ? " data-type=\"num\"" : "",
		            fixed[k][0]);
	}
	strbuf_addstr(sb, "</tr></thead>\n<tbody>\n");
	for (size_t i = 0; i < c->m.ntrials; i++) {
		const struct sweep_trial_series *ts = &c->ts[i];
		const struct trial_row *t = ts->t;
		strbuf_addf(sb, "<tr><td data-v=\"%.6f\"><span class=\"sw\" style=\"background:%s\"></span>%s</td>",
		            (double)(t->idx + 1) + (double)t->attempt / 1000, plot_color(ts->config_index),
		            ts->label + strlen("trial "));
		const char *p = t->vals;
		for (size_t d = 0; d < c->m.ndims; d++) {
			const char *end = p ? strchr(p, '\x1f') : NULL;
			char *v = p ? strndup(p, end ? (size_t)(end - p) : strlen(p)) : xstrdup("?");
			text_cell(sb, v);
			free(v);
			p = end ? end + 1 : NULL;
		}
		text_cell(sb, trial_status_name(t->status));
		text_cell(sb, cause_name(t->cause));
		snprintf(b, sizeof(b), "%.6g", t->metric);
		num_cell(sb, t->has_metric ? t->metric : NAN, b);
		text_cell(sb, t->verdict);
		num_cell(sb, t->growth_bytes_per_step, render_signed_bytes(b, sizeof(b), t->growth_bytes_per_step));
		for (int q = 0; q < 5; q++)
			num_cell(sb, t->q[q], fmt_bytes(b, sizeof(b), t->q[q]));
		snprintf(b, sizeof(b), "%.3g", t->steps_per_second);
		num_cell(sb, t->steps_per_second > 0 ? t->steps_per_second : NAN, b);
		num_cell(sb, t->run_id ? (double)t->peak_bytes : NAN, fmt_bytes(b, sizeof(b), (double)t->peak_bytes));
		if (c->m.have_pred)
			num_cell(sb, c->m.pred[i].peak[0], fmt_bytes(b, sizeof(b), c->m.pred[i].peak[0]));
		snprintf(b, sizeof(b), "%lld", (long long)t->run_id);
		num_cell(sb, t->run_id ? (double)t->run_id : NAN, b);
		strbuf_addstr(sb, "</tr>\n");
	}
	strbuf_addstr(sb, "</tbody></table>\n");
}

int sweep_write_html(struct store *st, int64_t sweep_id, struct strbuf *sb)
{
	struct sweep_charts c;
	if (sweep_charts_open(st, sweep_id, &c) < 0)
		return -1;
	char title[96];
	snprintf(title, sizeof(title), "leakproof sweep %lld", (long long)c.m.sw.id);
	head(sb, title);
	/* a card per status; the first three always, the rest when any */
	static const enum trial_status kinds[] = { TRIAL_OK, TRIAL_OOM, TRIAL_FAILED, TRIAL_SKIPPED, TRIAL_PRUNED };
	static const char *const names[] = { "ok", "oom", "failed", "skipped", "pruned", "other" };
	enum { NCARDS = sizeof(names) / sizeof(names[0]) };
	int counts[NCARDS] = { 0 };
	for (size_t i = 0; i < c.m.ntrials; i++) {
		int k = 0;
		while (k < NCARDS - 1 && c.m.trials[i].status != kinds[k])
			k++;
		counts[k]++;
	}
	strbuf_addf(sb, "<header>\n<h1>%s</h1>\n<p class=\"cmd\"><code>", title);
	plot_add_xml(sb, c.m.sw.file);
	strbuf_addstr(sb, "</code> \xe2\x80\x94 ");
	plot_add_xml(sb, c.m.sw.method);
	strbuf_addstr(sb, ", ");
	plot_add_xml(sb, sweep_status_name(c.m.sw.status));
	strbuf_addf(sb, "</p>\n<div class=\"cards\">\n");
	char b[32];
	snprintf(b, sizeof(b), "%zu", c.m.ntrials);
	card(sb, b, c.m.ntrials == 1 ? "trial" : "trials");
	snprintf(b, sizeof(b), "%zu", c.nconfigs);
	card(sb, b, c.nconfigs == 1 ? "configuration" : "configurations");
	for (int k = 0; k < NCARDS; k++)
		if (counts[k] || k < 3) {
			snprintf(b, sizeof(b), "%d", counts[k]);
			card(sb, b, names[k]);
		}
	if (c.m.sw.metric[0]) {
		struct strbuf m = STRBUF_INIT;
		strbuf_addf(&m, "metric (%s)", c.m.sw.maximize ? "maximize" : "minimize");
		card(sb, c.m.sw.metric, strbuf_str(&m));
		strbuf_release(&m);
	}
	strbuf_addstr(sb, "</div>\n</header>\n");

	struct plot_legend_item *legend = sweep_charts_legend(&c);
	if (c.memory.nseries) {
		c.memory.legend = c.change.legend = legend;
		c.memory.nlegend = c.change.nlegend = c.nconfigs;
		strbuf_addf(sb, "<section id=\"memory\"><h2>Memory over %s, one line per trial, colored by "
		            "configuration</h2>\n", c.over_time ? "time" : "steps");
		chart(sb, &c.memory);
		strbuf_addf(sb, "</section>\n<section id=\"change\"><h2>Memory change per %s</h2>\n",
		            c.over_time ? "sample" : "step");
		chart(sb, &c.change);
		strbuf_addstr(sb, "</section>\n");
	} else {
		strbuf_addstr(sb, "<p class=\"note\">No trial recorded memory yet: nothing to draw.</p>\n");
	}
	strbuf_addstr(sb, "<section id=\"table\"><h2>Trials</h2>\n<p class=\"note\">Click a column to sort by it; "
	              "again for the other order.</p>\n");
	sweep_table(sb, &c);
	strbuf_addstr(sb, "</section>\n");
	/* what the sweep learned of memory (report/sweep.c's words) */
	struct strbuf mm = STRBUF_INIT;
	sweep_memory_model_write(&c.m, &mm, false);
	if (mm.len) {
		strbuf_addstr(sb, "<section id=\"memory-model\"><h2>What the sweep learned of memory</h2>\n<pre>");
		plot_add_xml(sb, strbuf_str(&mm));
		strbuf_addstr(sb, "</pre>\n</section>\n");
	}
	strbuf_release(&mm);
	snprintf(b, sizeof(b), "sweep:%lld", (long long)c.m.sw.id);
	tail(sb, b);
	free(legend);
	sweep_charts_release(&c);
	return 0;
}
