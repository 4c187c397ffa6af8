import { Link, Navigate, Outlet, useLocation, useNavigate } from "react-router";

import { useLogout, useSession } from "../api/hooks";
import { ErrorBox } from "./ErrorBox";

/** Pages behind the login: a header bar, then the page. Unauthenticated users go to /login. */
export function Layout() {
  const session = useSession();
  const logout = useLogout();
  const location = useLocation();
  const navigate = useNavigate();

  if (session.isPending) return <p className="page muted">Loading…</p>;
  if (session.isError) {
    return (
      <div className="page">
        <ErrorBox error={session.error} title="Cannot load the session" />
      </div>
    );
  }
  if (!session.data.user) {
    const next = location.pathname + location.search;
    return <Navigate to={`/login?next=${encodeURIComponent(next)}`} replace />;
  }

  return (
    <>
      <header className="topbar">
        <Link to="/" className="brand">
          Barrel
        </Link>
        <nav>
          <Link to="/">Runs</Link> <Link to="/groups">Groups</Link> <Link to="/compare">Compare</Link> <Link to="/evals">Evals</Link> <Link to="/chat">Chat</Link> <Link to="/failures">Failures</Link> <Link to="/alerts">Alerts</Link> <Link to="/queue">Queue</Link> <Link to="/settings" data-testid="nav-settings">Team</Link> <Link to="/runs/new" data-testid="nav-new-run">New run</Link>
        </nav>
        <span className="spacer" />
        <span className="muted">{session.data.user.username}</span>
        <button
          type="button"
          className="link-button"
          disabled={logout.isPending}
          onClick={() => logout.mutate(undefined, { onSettled: () => void navigate("/login") })}
        >
          Log out
        </button>
      </header>
      <main className="page">
        <Outlet />
      </main>
    </>
  );
}
