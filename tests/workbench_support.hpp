// The workbench's test helpers shared by test_app's files (they link embedlab_app).
#pragma once

#include <QObject>
#include <QString>
#include <gtest/gtest.h>

#include "gui_test_support.hpp"
#include "main_window.hpp"
#include "model_summary.hpp"

namespace embedlab::test {

// The window with `model` shown and analysed.
inline void open_shown(app::MainWindow& window, const QString& model)
{
    bool shown = false;
    QObject::connect(&window, &app::MainWindow::modelShown, [&](bool ok) { shown = ok; });
    window.openModel(model);
    ASSERT_TRUE(wait_for([&] { return shown && window.jobs().idle(); }));
}

// The window with the bundled model shown and analysed.
inline void open_bundled(app::MainWindow& window)
{
    open_shown(window, QString::fromStdString(app::default_model()));
}

} // namespace embedlab::test
