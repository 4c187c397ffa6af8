import { useState, type FormEvent } from "react";
import { Navigate, useNavigate, useSearchParams } from "react-router";

import { useLogin, useSession } from "../../api/hooks";
import { ErrorBox } from "../../components/ErrorBox";
import { safeNextPath } from "./next";

export function LoginPage() {
  // Loading the session first also sets the csrftoken cookie the POST needs.
  const session = useSession();
  const login = useLogin();
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const next = safeNextPath(params.get("next"));
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");

  if (session.data?.user) return <Navigate to={next} replace />;

  const submit = (event: FormEvent) => {
    event.preventDefault();
    login.mutate({ username, password }, { onSuccess: () => void navigate(next, { replace: true }) });
  };

  return (
    <main className="login">
      <form className="login-card" onSubmit={submit} aria-label="Log in">
        <h1>Barrel</h1>
        <p className="muted">Sign in to the RL control plane.</p>
        <label>
          Username
          <input
            name="username"
            autoComplete="username"
            value={username}
            onChange={(e) => setUsername(e.target.value)}
            required
            autoFocus
          />
        </label>
        <label>
          Password
          <input
            name="password"
            type="password"
            autoComplete="current-password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            required
          />
        </label>
        {login.isError ? <ErrorBox error={login.error} /> : null}
        <button type="submit" className="primary" disabled={login.isPending}>
          {login.isPending ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
