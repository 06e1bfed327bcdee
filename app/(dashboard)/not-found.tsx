import { NotFoundBody } from "@/components/layout/not-found-body";

export const metadata = { title: "Not found · Gatehouse" };

/** A run or project that does not exist (notFound() in a dashboard page): the dashboard's layout already has the menu. */
export default function DashboardNotFound() {
  return <NotFoundBody className="flex flex-col items-start gap-4 py-10" />;
}
