// The key settings page: lists keys, creates one (showing its secret once),
// deletes one after a confirmation. It talks to the admin API beside it.
"use strict";

const api = "api/keys";
const $ = (id) => document.getElementById(id);

function when(unix) {
	if (unix == null) return "—";
	return new Date(unix * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function cell(tr, text, cls) {
	const td = document.createElement("td");
	td.textContent = text;
	if (cls) td.className = cls;
	tr.appendChild(td);
	return td;
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
	for (const k of list.data) {
		const tr = document.createElement("tr");
		tr.dataset.id = k.id;
		const name = cell(tr, k.name);
		if (k.exposed_at != null) {
			tr.className = "exposed";
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
		const del = document.createElement("button");
		del.type = "button";
		del.className = "delete";
		del.textContent = "Delete";
		del.setAttribute("aria-label", "Delete key " + k.name);
		del.addEventListener("click", () => confirmDelete(k));
		actions.appendChild(del);
		body.appendChild(tr);
	}
	$("keys").hidden = list.data.length === 0;
	$("empty").hidden = list.data.length !== 0;
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
	$("create").disabled = true;
	try {
		const k = await call("POST", api, req);
		show($("create-error"), "");
		$("secret").value = k.key;
		$("secret-box").hidden = false;
		$("copied").hidden = true;
		$("create-form").reset();
		$("secret").select();
	} catch (e) {
		show($("create-error"), e.message);
	} finally {
		$("create").disabled = false;
	}
	await load();
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

document.addEventListener("DOMContentLoaded", () => {
	$("create-form").addEventListener("submit", create);
	$("copy").addEventListener("click", copySecret);
	$("done").addEventListener("click", forgetSecret);
	load();
});
