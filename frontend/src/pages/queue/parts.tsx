/** Pieces the queue page and its audit share. */
import { Link } from "react-router";

export function Head({ headers }: { headers: string[] }) {
  return (
    <thead>
      <tr>
        {headers.map((h) => (
          <th key={h}>{h}</th>
        ))}
      </tr>
    </thead>
  );
}

export function RunLink({ id, name }: { id: number; name: string }) {
  return (
    <Link to={`/runs/${id}`}>
      <span className="num">#{id}</span> {name}
    </Link>
  );
}
