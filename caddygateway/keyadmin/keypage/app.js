// The key settings page: says whose account it is; lists the account's
// keys with their limits, budget and spend over the last 30 days; creates
// one (showing its secret once) with optional limits and a budget; edits
// a key's limits and budget; deletes a key after a confirmation; lists
// the account's batches, files, members and audit log. On the admin
// endpoint (the operator) it lists every key. It talks to the API beside
// it.
"use strict";

const api = "api/keys";
const policyAPI = "api/policy";
// me is who is signed in (GET api/account): {operator, identity, role,
// account}.
let me = { operator: true };
const canChange = () => me.operator || me.role !== "viewer";
const chartDays = 30;
const $ = (id) => document.getElementById(id);

function when(unix) {
	if (unix == null) return "—";
	return new Date(unix * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

// whenUTC writes a budget's reset time: periods are UTC calendar days
// and months.
function whenUTC(unix) {
	return new Date(unix * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" }) + " UTC";
}

function cell(tr, text, cls) {
	const td = document.createElement("td");
	td.textContent = text;
	if (cls) td.className = cls;
	tr.appendChild(td);
	return td;
}

function el(tag, attrs, text) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
	if (text != null) e.textContent = text;
	return e;
}

async function call(method, path, body) {
	const res = await fetch(path, {
		method,
		headers: body ? { "Content-Type": "application/json" } : {},
		body: body ? JSON.stringify(body) : undefined,
	});
	if (res.status === 204) return null;
	const data = await res.json().catch(() => ({}));
	if (!res.ok) throw new Error(data.error || res.status + " " + res.statusText);
	return data;
}

function show(el, text) {
	el.textContent = text;
	el.hidden = !text;
}

// Amounts of dollars arrive as exact decimal strings ("0.000123"): they
// are shown as they are, never through a float.
const usd = (s) => "$" + s;
const isZero = (s) => /^0(\.0*)?$/.test(s);
const plural = (n, one, many) => n + " " + (n === 1 ? one : many);

const periods = { day: "per day", month: "per month", total: "in total" };
const budgetText = (b) => usd(b.usd) + " " + (periods[b.period] || b.period);

// limitsText lists the limits of a policy: "60 requests/min, 8 concurrent".
function limitsText(l) {
	const parts = [];
	if (l && l.requests_per_minute) parts.push(l.requests_per_minute + " requests/min");
	if (l && l.tokens_per_minute) parts.push(l.tokens_per_minute + " tokens/min");
	if (l && l.concurrent_requests) parts.push(l.concurrent_requests + " concurrent");
	return parts.join(", ");
}

// defaults reads the limits and budget a key without its own gets, and
// those of owner, which its keys share.
function defaults(owner) {
	return call("GET", policyAPI + (owner ? "?owner=" + encodeURIComponent(owner) : ""));
}

// ---- The limits and budget fields (create form and edit dialog) ----

// policyEditor puts the limits and budget fields into container; name
// keeps its radio groups apart from the other editor's.
function policyEditor(container, name) {
	container.appendChild($("policy-template").content.cloneNode(true));
	for (const r of container.querySelectorAll("input[type=radio]")) r.name = name + "-" + r.dataset.group;
	const field = (f) => container.querySelector(`[data-f="${f}"]`);
	const mode = (group) => container.querySelector(`input[data-group="${group}"]:checked`).value;
	const setMode = (group, value) => {
		container.querySelector(`input[data-group="${group}"][value="${value}"]`).checked = true;
	};
	const sync = () => {
		for (const group of ["limits", "budget"]) {
			const own = mode(group) === "own";
			const box = container.querySelector(`[data-own="${group}"]`);
			box.classList.toggle("off", !own);
			for (const input of box.querySelectorAll("input, select")) input.disabled = !own;
		}
	};
	container.addEventListener("change", sync);
	const limitFields = { rpm: "requests_per_minute", tpm: "tokens_per_minute", concurrent: "concurrent_requests" };
	const labels = { rpm: "Requests per minute", tpm: "Tokens per minute", concurrent: "Concurrent requests" };
	const editor = {
		sync,
		// read returns {limits, budget} as the API takes them (a field left
		// out: the gateway's default), or throws an Error saying what is
		// wrong.
		read() {
			const p = {};
			if (mode("limits") === "own") {
				p.limits = {};
				for (const [f, key] of Object.entries(limitFields)) {
					const v = field(f).value.trim();
					if (v === "") continue;
					if (!/^[0-9]+$/.test(v)) throw new Error(labels[f] + " must be a whole number");
					if (Number(v) > 0) p.limits[key] = Number(v);
				}
			}
			if (mode("budget") === "own") {
				const v = field("usd").value.trim().replace(/^\$/, "");
				if (!/^[0-9]+(\.[0-9]+)?$/.test(v)) throw new Error("The budget must be an amount of dollars such as 25 or 0.50");
				p.budget = { usd: v, period: field("period").value };
			}
			return p;
		},
		// showDefaults tells, beside "The gateway's default", what that
		// default is (p: an answer of GET policy), and what the owner's
		// keys share.
		showDefaults(p, owner) {
			const text = (sel, t) => { container.querySelector(`[data-default="${sel}"]`).textContent = t; };
			text("limits", "(" + (limitsText(p.key.limits) || "no limits") + ")");
			text("budget", "(" + (p.key.budget ? budgetText(p.key.budget) : "no budget") + ")");
			const shared = [limitsText(p.owner && p.owner.limits), p.owner && p.owner.budget ? budgetText(p.owner.budget) : ""].filter(Boolean);
			const line = container.querySelector('[data-default="owner"]');
			line.textContent = shared.length ? "Shared with the other keys of owner " + owner + ": " + shared.join(", ") + "." : "";
			line.hidden = !shared.length;
		},
		// fill shows a key's own limits and budget.
		fill(k) {
			setMode("limits", k.limits ? "own" : "default");
			for (const [f, key] of Object.entries(limitFields)) field(f).value = k.limits && k.limits[key] ? k.limits[key] : "";
			setMode("budget", k.budget ? "own" : "default");
			field("usd").value = k.budget ? k.budget.usd : "";
			field("period").value = k.budget ? k.budget.period : "month";
			sync();
		},
	};
	sync();
	return editor;
}

let newPolicy, editPolicy;

// ---- The list ----

async function load() {
	let list;
	try {
		list = await call("GET", api);
	} catch (e) {
		show($("list-error"), "The keys could not be loaded: " + e.message);
		return;
	}
	show($("list-error"), "");
	const body = $("keys").tBodies[0];
	body.replaceChildren();
	const details = [];
	for (const k of list.data) {
		const tr = document.createElement("tr");
		tr.dataset.id = k.id;
		tr.className = "key";
		const name = cell(tr, k.name);
		if (k.exposed_at != null) {
			tr.classList.add("exposed");
			const badge = document.createElement("span");
			badge.className = "badge";
			badge.textContent = "Exposed";
			badge.title = "Found in public " + when(k.exposed_at) + ": delete it and create a new one";
			name.appendChild(document.createElement("br"));
			name.appendChild(badge);
			if (k.exposure && k.exposure.url) {
				const where = document.createElement("span");
				where.className = "where";
				where.textContent = k.exposure.url;
				name.appendChild(where);
			}
		}
		cell(tr, k.owner);
		const hint = cell(tr, "");
		const code = document.createElement("code");
		code.textContent = k.hint;
		hint.appendChild(code);
		cell(tr, k.models && k.models.length ? k.models.join(", ") : "all", k.models && k.models.length ? "" : "muted");
		cell(tr, when(k.created_at));
		cell(tr, k.last_used_at == null ? "never" : when(k.last_used_at), k.last_used_at == null ? "muted" : "");
		cell(tr, k.expires_at == null ? "never" : when(k.expires_at), k.expires_at == null ? "muted" : "");
		const actions = cell(tr, "", "actions");
		if (canChange()) {
			const edit = el("button", { type: "button", class: "edit secondary", "aria-label": "Edit the limits and budget of key " + k.name }, "Limits");
			edit.addEventListener("click", () => openEdit(k));
			const del = el("button", { type: "button", class: "delete", "aria-label": "Delete key " + k.name }, "Delete");
			del.addEventListener("click", () => confirmDelete(k));
			actions.append(edit, del);
		}

		const more = el("tr", { class: "details" });
		more.dataset.detailsFor = k.id;
		const td = el("td", { colspan: "8" });
		td.appendChild(el("p", { class: "muted" }, "Loading limits and usage…"));
		more.appendChild(td);
		body.append(tr, more);
		details.push([k, td]);
	}
	$("keys").hidden = list.data.length === 0;
	$("empty").hidden = list.data.length !== 0;
	// A few at a time: each reads the key's usage records.
	const queue = details.slice();
	const worker = async () => {
		while (queue.length) {
			const [k, td] = queue.shift();
			await loadDetails(k, td);
		}
	};
	await Promise.all([worker(), worker(), worker(), worker()]);
}

async function loadDetails(k, td) {
	let u;
	try {
		u = await call("GET", api + "/" + encodeURIComponent(k.id) + "/usage?days=" + chartDays);
	} catch (e) {
		td.replaceChildren(el("p", { class: "error" }, "The limits and usage could not be loaded: " + e.message));
		return;
	}
	const box = el("div", { class: "details-grid" });
	box.append(limitsSection(u), budgetSection(u), spendSection(u));
	td.replaceChildren(box);
	if (u.status_error) td.appendChild(el("p", { class: "error" }, u.status_error));
	if (u.incomplete && u.incomplete.length) {
		td.appendChild(el("p", { class: "error" }, "Some usage records could not be read: the spend shown is missing their part."));
	}
}

function section(title) {
	const s = el("section");
	s.appendChild(el("h3", {}, title));
	return s;
}

function dl(rows) {
	const list = el("dl");
	for (const [term, field, text] of rows) {
		list.appendChild(el("dt", {}, term));
		list.appendChild(el("dd", { "data-field": field }, text));
	}
	return list;
}

// limitText is one of a key's limits: its own ("100"), the default it
// follows ("default: 100"), or "none"; with what is left of it now.
function limitText(own, effective, field, status) {
	const v = own ? own[field] || 0 : (effective && effective[field]) || 0;
	if (!v) return "none";
	let s = (own ? "" : "default: ") + v;
	if (status && status.limit === v) s += " · " + status.remaining + " left now";
	return s;
}

function limitsSection(u) {
	const s = section("Rate limits");
	const own = u.key.limits;
	const eff = u.policy.key.limits;
	const st = u.status ? u.status.key : {};
	s.appendChild(dl([
		["Requests per minute", "rpm", limitText(own, eff, "requests_per_minute", st.requests_per_minute)],
		["Tokens per minute", "tpm", limitText(own, eff, "tokens_per_minute", st.tokens_per_minute)],
		["Concurrent requests", "concurrent", limitText(own, eff, "concurrent_requests", null)],
	]));
	const ol = u.policy.owner && u.policy.owner.limits;
	if (ol && (ol.requests_per_minute || ol.tokens_per_minute || ol.concurrent_requests)) {
		const parts = [];
		if (ol.requests_per_minute) parts.push(ol.requests_per_minute + " requests/min");
		if (ol.tokens_per_minute) parts.push(ol.tokens_per_minute + " tokens/min");
		if (ol.concurrent_requests) parts.push(ol.concurrent_requests + " concurrent");
		s.appendChild(el("p", { class: "owner-line", "data-field": "owner-limits" },
			"Shared with owner " + u.key.owner + ": " + parts.join(", ")));
	}
	return s;
}

function budgetSection(u) {
	const s = section("Budget");
	const own = u.key.budget;
	const eff = u.policy.key.budget;
	let text = "none";
	if (own) text = budgetText(own);
	else if (eff) text = "default: " + budgetText(eff);
	const rows = [["Budget", "budget", text]];
	const st = u.status && u.status.key.budget;
	if (st) {
		rows.push(["Spent", "budget-spent", usd(st.spent_usd)]);
		if (!isZero(st.reserved_usd)) rows.push(["In flight", "budget-reserved", usd(st.reserved_usd)]);
		rows.push(["Left", "budget-left", usd(st.left_usd)]);
		rows.push(["Resets", "budget-resets", st.resets_at == null ? "never" : whenUTC(st.resets_at)]);
	}
	s.appendChild(dl(rows));
	const ob = u.status && u.status.owner && u.status.owner.budget;
	if (ob) {
		s.appendChild(el("p", { class: "owner-line", "data-field": "owner-budget" },
			"Owner " + u.key.owner + ": " + budgetText(ob) + ", " + usd(ob.left_usd) + " left"));
	}
	return s;
}

function spendSection(u) {
	const s = section("Spend, last " + u.days.length + " days");
	s.appendChild(spendChart(u));
	let total = usd(u.total.cost_usd) + " · " + plural(u.total.requests, "request", "requests");
	if (u.total.unpriced_requests) total += " (" + u.total.unpriced_requests + " of models without a price, not in the cost)";
	s.appendChild(el("p", { class: "spend-total", "data-field": "spend-total" }, total));
	return s;
}

// The SVG namespace, from the page's own inline <svg>: HTML puts it there.
let svgNS;

function svg(tag, attrs, text) {
	svgNS = svgNS || $("svg-namespace").namespaceURI;
	const e = document.createElementNS(svgNS, tag);
	for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
	if (text != null) e.textContent = text;
	return e;
}

// dayTitle tells a day's usage, for its bar's tooltip and screen readers.
function dayTitle(d) {
	let t = d.day + ": " + usd(d.cost_usd) + " · " + plural(d.requests, "request", "requests");
	if (d.unpriced_requests) t += " (" + d.unpriced_requests + " unpriced)";
	return t + " · " + d.input_tokens + " input, " + d.output_tokens + " output tokens";
}

// spendChart draws one bar per day, as high as its cost against the
// highest day's. The heights use floats; every number shown is the API's.
function spendChart(u) {
	const w = 8, gap = 2, h = 48;
	const chart = svg("svg", {
		class: "chart", role: "img", width: u.days.length * (w + gap), height: h,
		viewBox: "0 0 " + u.days.length * (w + gap) + " " + h,
	});
	const costs = u.days.map((d) => Number(d.cost_usd));
	const max = Math.max(0, ...costs);
	let label = "Spend of key " + u.key.name + " from " + u.from + " to " + u.to + ": " + usd(u.total.cost_usd) +
		", " + plural(u.total.requests, "request", "requests");
	if (max > 0) {
		const top = u.days[costs.indexOf(max)];
		label += "; the most on " + top.day + ", " + usd(top.cost_usd);
	}
	chart.setAttribute("aria-label", label);
	chart.appendChild(svg("title", {}, label));
	u.days.forEach((d, i) => {
		const g = svg("g", { "data-day": d.day });
		g.appendChild(svg("title", {}, dayTitle(d)));
		const x = i * (w + gap);
		g.appendChild(svg("rect", { class: "hit", x, y: 0, width: w + gap, height: h }));
		const bh = max > 0 && costs[i] > 0 ? Math.max(2, Math.round((costs[i] / max) * h)) : 1;
		const cls = costs[i] > 0 ? "bar" : d.requests > 0 ? "bar unpriced" : "bar zero";
		g.appendChild(svg("rect", { class: cls, x, y: h - bh, width: w, height: bh }));
		chart.appendChild(g);
	});
	return chart;
}

// ---- Edit, delete, create ----

// showNewDefaults shows in the create form what a new key would follow:
// one of the signed-in account, or for the operator, of the owner typed
// (or of the name, its default owner).
async function showNewDefaults() {
	const owner = me.operator ? $("owner").value.trim() || $("name").value.trim() : me.account.id;
	try {
		newPolicy.showDefaults(await defaults(owner), owner);
	} catch (e) {
		show($("create-error"), "The gateway's defaults could not be read: " + e.message);
	}
}

function openEdit(k) {
	const dlg = $("edit");
	$("edit-name").textContent = k.name;
	show($("edit-error"), "");
	editPolicy.fill(k);
	defaults(k.owner).then((p) => editPolicy.showDefaults(p, k.owner), (e) => show($("edit-error"), "The gateway's defaults could not be read: " + e.message));
	$("edit-form").onsubmit = async (ev) => {
		ev.preventDefault();
		let p;
		try {
			p = editPolicy.read();
		} catch (e) {
			show($("edit-error"), e.message);
			return;
		}
		$("edit-save").disabled = true;
		try {
			await call("PATCH", api + "/" + encodeURIComponent(k.id), p);
		} catch (e) {
			show($("edit-error"), e.message);
			return;
		} finally {
			$("edit-save").disabled = false;
		}
		dlg.close();
		await load();
		await refreshAccount();
	};
	dlg.showModal();
}

function confirmDelete(k) {
	const dlg = $("confirm");
	$("confirm-name").textContent = k.name;
	$("confirm-hint").textContent = k.hint;
	dlg.returnValue = "";
	dlg.onclose = async () => {
		if (dlg.returnValue !== "delete") return;
		try {
			await call("DELETE", api + "/" + encodeURIComponent(k.id));
		} catch (e) {
			show($("list-error"), "The key could not be deleted: " + e.message);
			return;
		}
		await load();
		await refreshAccount();
	};
	dlg.showModal();
	$("confirm-cancel").focus();
}

async function create(ev) {
	ev.preventDefault();
	const req = { name: $("name").value.trim() };
	const owner = $("owner").value.trim();
	if (owner) req.owner = owner;
	const models = $("models").value.split(",").map((s) => s.trim()).filter(Boolean);
	if (models.length) req.models = models;
	if ($("expires").value) req.expires_at = Math.floor(new Date($("expires").value + "T23:59:59").getTime() / 1000);
	try {
		Object.assign(req, newPolicy.read());
	} catch (e) {
		show($("create-error"), e.message);
		return;
	}
	$("create").disabled = true;
	try {
		const k = await call("POST", api, req);
		show($("create-error"), "");
		$("secret").value = k.key;
		$("secret-box").hidden = false;
		$("copied").hidden = true;
		$("create-form").reset();
		newPolicy.sync();
		showNewDefaults();
		$("secret").select();
	} catch (e) {
		show($("create-error"), e.message);
	} finally {
		$("create").disabled = false;
	}
	await load();
	await refreshAccount();
}

async function copySecret() {
	const text = $("secret").value;
	try {
		await navigator.clipboard.writeText(text);
	} catch {
		$("secret").select();
		document.execCommand("copy");
	}
	$("copied").hidden = false;
}

function forgetSecret() {
	$("secret").value = "";
	$("secret-box").hidden = true;
}

// ---- The account: who is signed in, its batches, files, members and audit log ----

async function loadAccount() {
	try {
		me = await call("GET", "api/account");
	} catch (e) {
		show($("list-error"), "Your account could not be loaded: " + e.message);
		return false;
	}
	if (me.operator) {
		show($("whoami"), "Operator view: every account's keys.");
		return true;
	}
	const a = me.account;
	show($("whoami"), "Account " + a.id + " · signed in as " + me.identity + " (" + me.role + ")");
	$("owner-field").hidden = true;
	if (a.suspended_at != null) {
		show($("suspended"), "This account is suspended" + (a.suspended_reason ? " (" + a.suspended_reason + ")" : "") +
			": its keys are refused. Ask the gateway's operator.");
	}
	$("create-card").hidden = !canChange();
	for (const id of ["batches-card", "files-card"]) $(id).hidden = false;
	const reads = me.role !== "member";
	$("members-card").hidden = !reads;
	$("audit-card").hidden = !reads;
	$("member-form").hidden = me.role !== "owner";
	return true;
}

// listInto fills a table's body with one row per item, or shows its empty
// line.
function listInto(table, empty, items, row) {
	const body = $(table).tBodies[0];
	body.replaceChildren();
	for (const it of items) {
		const tr = document.createElement("tr");
		row(tr, it);
		body.appendChild(tr);
	}
	$(table).hidden = items.length === 0;
	$(empty).hidden = items.length !== 0;
}

async function loadOwned() {
	for (const [what, table] of [["batches", "batches"], ["files", "files"]]) {
		let list;
		try {
			list = await call("GET", "api/" + what);
		} catch (e) {
			show($(what + "-error"), "The " + what + " could not be loaded: " + e.message);
			continue;
		}
		show($(what + "-error"), "");
		listInto(table, what + "-empty", list.data, (tr, x) => {
			tr.dataset.id = x.id;
			if (what === "batches") {
				cell(tr, x.id);
				cell(tr, x.status);
				cell(tr, x.endpoint);
				cell(tr, x.request_counts.completed + " done, " + x.request_counts.failed + " failed of " + x.request_counts.total);
			} else {
				cell(tr, x.id);
				cell(tr, x.filename);
				cell(tr, x.purpose);
				cell(tr, String(x.bytes));
			}
			cell(tr, when(x.created_at));
		});
	}
}

async function loadMembers() {
	if ($("members-card").hidden) return;
	let list;
	try {
		list = await call("GET", "api/members");
	} catch (e) {
		show($("members-error"), "The members could not be loaded: " + e.message);
		return;
	}
	show($("members-error"), "");
	const sources = { config: "the config", group: "a group rule", api: "this page or the operator", personal: "the account's name" };
	listInto("members", "members-empty", list.data, (tr, m) => {
		tr.dataset.identity = m.identity;
		cell(tr, m.identity);
		cell(tr, m.role);
		cell(tr, sources[m.source] || m.source);
		const actions = cell(tr, "", "actions");
		if (me.role === "owner" && m.source === "api") {
			const rm = el("button", { type: "button", class: "delete", "aria-label": "Remove member " + m.identity }, "Remove");
			rm.addEventListener("click", async () => {
				try {
					await call("DELETE", "api/members/" + encodeURIComponent(m.identity));
				} catch (e) {
					show($("members-error"), e.message);
					return;
				}
				await refreshAccount();
			});
			actions.appendChild(rm);
		}
	});
}

async function addMember(ev) {
	ev.preventDefault();
	try {
		await call("POST", "api/members", { identity: $("member-identity").value.trim(), role: $("member-role").value });
	} catch (e) {
		show($("members-error"), e.message);
		return;
	}
	$("member-form").reset();
	await refreshAccount();
}

// actorText names who made a change.
function actorText(a) {
	if (a.type === "operator") return "the operator";
	if (a.type === "secret_scanner") return "secret scanning (" + a.identity + ")";
	return a.identity + " (" + a.role + ")";
}

async function loadAudit() {
	if ($("audit-card").hidden) return;
	let list;
	try {
		list = await call("GET", "api/audit?limit=50");
	} catch (e) {
		show($("audit-error"), "The audit log could not be loaded: " + e.message);
		return;
	}
	show($("audit-error"), "");
	listInto("audit", "audit-empty", list.data, (tr, e) => {
		tr.dataset.action = e.action;
		cell(tr, new Date(e.time).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" }));
		cell(tr, actorText(e.actor));
		cell(tr, e.actor.from || "—", e.actor.from ? "" : "muted");
		cell(tr, e.action);
		cell(tr, e.target.type + " " + (e.target.name || e.target.id));
	});
}

// refreshAccount reloads what the account shows besides its keys.
async function refreshAccount() {
	if (me.operator) return;
	await Promise.all([loadOwned(), loadMembers(), loadAudit()]);
}

document.addEventListener("DOMContentLoaded", async () => {
	newPolicy = policyEditor($("new-policy"), "new");
	editPolicy = policyEditor($("edit-policy"), "edit");
	$("create-form").addEventListener("submit", create);
	$("name").addEventListener("change", showNewDefaults);
	$("owner").addEventListener("change", showNewDefaults);
	$("copy").addEventListener("click", copySecret);
	$("done").addEventListener("click", forgetSecret);
	$("edit-cancel").addEventListener("click", () => $("edit").close());
	$("member-form").addEventListener("submit", addMember);
	if (!(await loadAccount())) return;
	showNewDefaults();
	await load();
	await refreshAccount();
});
