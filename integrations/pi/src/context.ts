// SPDX-License-Identifier: MIT
/*
 * The `context` hook's rule, before every model request: exactly one announcement, and the
 * current one. Announcements are custom messages of type "piworkfs" (stored by
 * before_agent_start once per prompt, hidden from the transcript). Older copies are
 * dropped; when the newest stored copy is no longer current (the mode changed since it
 * was stored, say between two tool calls), it is dropped too and the current text is
 * appended after the latest message, so the very next request carries it.
 *
 * Pure: the same messages and text give the same result, which keeps the request bytes
 * stable while the mode does not change (prompt caches keep working).
 */

export const ANNOUNCEMENT_TYPE = "piworkfs";

export function isAnnouncement(m: any): boolean {
	return !!m && m.role === "custom" && m.customType === ANNOUNCEMENT_TYPE;
}

/** The text of a message content: a string or a list of parts. */
export function contentText(content: unknown): string {
	if (typeof content === "string") return content;
	if (Array.isArray(content)) return content.map((c: any) => (c && c.type === "text" ? String(c.text ?? "") : "")).join("");
	return "";
}

/**
 * MESSAGES with exactly one announcement whose text is CURRENT; or undefined when they
 * already are so (the hook then leaves the request untouched). CURRENT null: Pi is not in
 * a view, nothing changes. NOW stamps an appended message (Pi keeps it out of the
 * request body).
 */
export function filterContext(messages: any[], current: string | null, now = 0): any[] | undefined {
	if (current === null) return undefined;
	const idx: number[] = [];
	messages.forEach((m, i) => {
		if (isAnnouncement(m)) idx.push(i);
	});
	const last = idx.length ? idx[idx.length - 1] : -1;
	if (last >= 0 && contentText(messages[last].content) === current) {
		if (idx.length === 1) return undefined;
		return messages.filter((m, i) => !isAnnouncement(m) || i === last);
	}
	const kept = messages.filter((m) => !isAnnouncement(m));
	kept.push({ role: "custom", customType: ANNOUNCEMENT_TYPE, content: current, display: false, timestamp: now });
	return kept;
}
