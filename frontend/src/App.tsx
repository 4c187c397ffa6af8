import { Route, Routes } from "react-router";

import { Layout } from "./components/Layout";
import { EvalPage } from "./pages/evals/EvalPage";
import { EvalsPage } from "./pages/evals/EvalsPage";
import { VotePage } from "./pages/evals/VotePage";
import { LoginPage } from "./pages/login/LoginPage";
import { MlflowLinkPage } from "./pages/mlflow/MlflowLinkPage";
import { RunPage } from "./pages/run/RunPage";
import { RunsPage } from "./pages/runs/RunsPage";

function NotFound() {
  return <p>There is no page here.</p>;
}

export function App() {
  return (
    <Routes>
      <Route path="/login" element={<LoginPage />} />
      <Route path="/mlflow" element={<MlflowLinkPage />} />
      <Route element={<Layout />}>
        <Route index element={<RunsPage />} />
        <Route path="runs/:id" element={<RunPage />} />
        <Route path="evals" element={<EvalsPage />} />
        <Route path="evals/:id" element={<EvalPage />} />
        <Route path="evals/:id/vote" element={<VotePage />} />
        <Route path="*" element={<NotFound />} />
      </Route>
    </Routes>
  );
}
