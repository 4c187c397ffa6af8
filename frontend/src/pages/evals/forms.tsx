/**
 * What the eval-set and new-eval forms share: the server's field errors placed next to the
 * fields they name (`name`, `jsonl[3].prompt`, `external[1].label`), the rest in one box on top,
 * and who may create (members and admins of a team).
 */
import { ApiError, errorMessage } from "../../api/client";
import type { Team } from "../../api/types";

/** The API's field paths → messages of an error; none for anything else (a network error, say). */
export function errorFields(error: unknown): Record<string, string[]> {
  return error instanceof ApiError ? error.fields : {};
}

/** Members and admins create eval sets and evals; viewers read (and vote where allowed). */
export function mayCreate(team: Pick<Team, "role"> | undefined): boolean {
  return team?.role === "member" || team?.role === "admin";
}

/** Why the caller cannot create in `team`, or null when they can. */
export function whyNotCreate(team: Pick<Team, "role" | "name"> | undefined, what: string): string | null {
  if (team === undefined) return null;
  if (mayCreate(team)) return null;
  return `You are ${team.role === "viewer" ? "a viewer" : "not a member"} of ${team.name}: only its members and admins create ${what}.`;
}

/** The messages of one field path, under its input. */
export function FieldError({ messages, testId }: { messages: string[] | undefined; testId?: string }) {
  if (!messages || messages.length === 0) return null;
  return (
    <p className="field-error" role="alert" data-testid={testId}>
      {messages.join("; ")}
    </p>
  );
}

/**
 * The error's message on top of the form, with the field errors that have no place of their own
 * (`placed` says which paths the form shows next to a field). A person reads the message first,
 * then finds each problem where it is.
 */
export function FormError({
  error,
  title,
  placed,
}: {
  error: unknown;
  title: string;
  placed: (path: string) => boolean;
}) {
  if (!error) return null;
  const rest = Object.entries(errorFields(error)).filter(([path]) => !placed(path));
  // A message that only lists the fields (controlplane.api.summarize: "Invalid input — path: …",
  // a 400's or a 404's naming checkpoints) says nothing the fields below do not; a message of its
  // own ("Team lab already has an eval set named 'arith'.") is worth reading.
  const onlyFields =
    error instanceof ApiError && Object.keys(error.fields).length > 0 && error.message.startsWith("Invalid input");
  return (
    <div className="error-box" role="alert" data-testid="form-error">
      <strong>{title}: </strong>
      {onlyFields ? "some fields need fixing; each problem is shown next to its field." : errorMessage(error)}
      {rest.length > 0 ? (
        <ul>
          {rest.map(([path, messages]) => (
            <li key={path}>
              <code>{path}</code>: {messages.join("; ")}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}
