/**
 * Where to go after logging in. Only same-site paths are allowed, so a crafted
 * link (/login?next=https://evil.example) cannot bounce a user off-site.
 */
export function safeNextPath(next: string | null | undefined): string {
  if (!next || !next.startsWith("/") || next.startsWith("//") || next.startsWith("/\\")) return "/";
  if (next.startsWith("/login")) return "/";
  return next;
}
