import { Route, Routes } from "react-router";

import { Layout } from "./components/Layout";
import { AlertsIndexPage, TeamAlertsPage } from "./pages/alerts/AlertsPage";
import { ChatPage } from "./pages/chat/ChatPage";
import { ChatSessionPage } from "./pages/chat/ChatSessionPage";
import { ComparePage } from "./pages/compare/ComparePage";
import { EvalPage } from "./pages/evals/EvalPage";
import { EvalSetPage } from "./pages/evals/EvalSetPage";
import { EvalSetsPage } from "./pages/evals/EvalSetsPage";
import { EvalsPage } from "./pages/evals/EvalsPage";
import { EvalResponsesPage } from "./pages/evals/GenerationsPanel";
import { NewEvalPage } from "./pages/evals/NewEvalPage";
import { NewEvalSetPage } from "./pages/evals/NewEvalSetPage";
import { VotePage } from "./pages/evals/VotePage";
import { GroupPage } from "./pages/groups/GroupPage";
import { GroupsPage } from "./pages/groups/GroupsPage";
import { LoginPage } from "./pages/login/LoginPage";
import { MlflowLinkPage } from "./pages/mlflow/MlflowLinkPage";
import { QueuePage } from "./pages/queue/QueuePage";
import { RunPage } from "./pages/run/RunPage";
import { RunsPage } from "./pages/runs/RunsPage";
import { SubmitPage } from "./pages/submit/SubmitPage";
import { SettingsIndexPage, TeamSettingsPage } from "./pages/team/TeamSettingsPage";
import { FailurePage } from "./pages/triage/FailurePage";
import { FailuresIndexPage, TriagePage } from "./pages/triage/TriagePage";

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
        <Route path="runs/new" element={<SubmitPage />} />
        <Route path="runs/:id" element={<RunPage />} />
        <Route path="evals" element={<EvalsPage />} />
        <Route path="evals/:id" element={<EvalPage />} />
        <Route path="evals/:id/vote" element={<VotePage />} />
        <Route path="evals/new" element={<NewEvalPage />} />
        <Route path="evals/:id/responses" element={<EvalResponsesPage />} />
        <Route path="eval-sets" element={<EvalSetsPage />} />
        <Route path="eval-sets/new" element={<NewEvalSetPage />} />
        <Route path="eval-sets/:id" element={<EvalSetPage />} />
        <Route path="groups" element={<GroupsPage />} />
        <Route path="groups/:id" element={<GroupPage />} />
        <Route path="compare" element={<ComparePage />} />
        <Route path="chat" element={<ChatPage />} />
        <Route path="chat/:id" element={<ChatSessionPage />} />
        <Route path="failures" element={<FailuresIndexPage />} />
        <Route path="failures/:id" element={<FailurePage />} />
        <Route path="teams/:id/failures" element={<TriagePage />} />
        <Route path="alerts" element={<AlertsIndexPage />} />
        <Route path="teams/:id/alerts" element={<TeamAlertsPage />} />
        <Route path="queue" element={<QueuePage />} />
        <Route path="teams/:id/queue" element={<QueuePage />} />
        <Route path="settings" element={<SettingsIndexPage />} />
        <Route path="teams/:id/settings" element={<TeamSettingsPage />} />
        <Route path="*" element={<NotFound />} />
      </Route>
    </Routes>
  );
}
