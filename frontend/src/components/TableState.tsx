/**
 * The rows a list table shows when it has nothing to list: "Loading…" while its query is
 * pending, `empty` once it answered with no rows.
 */
export function TableState({
  pending,
  empty,
  isEmpty,
  columns,
}: {
  pending: boolean;
  /** What an answered, empty list says. */
  empty: string;
  isEmpty: boolean;
  columns: number;
}) {
  const text = pending ? "Loading…" : isEmpty ? empty : null;
  if (text === null) return null;
  return (
    <tr>
      <td colSpan={columns} className="empty">
        {text}
      </td>
    </tr>
  );
}
