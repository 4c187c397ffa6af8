import { ApiError, errorMessage } from "../api/client";

/** An API error as a person can read it, with the bad fields of a validation error. */
export function ErrorBox({ error, title }: { error: unknown; title?: string }) {
  const fields = error instanceof ApiError ? Object.entries(error.fields) : [];
  return (
    <div className="error-box" role="alert">
      {title ? <strong>{title}: </strong> : null}
      {errorMessage(error)}
      {fields.length > 0 ? (
        <ul>
          {fields.map(([path, messages]) => (
            <li key={path}>
              <code>{path}</code>: {messages.join("; ")}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}
